"""Charikar's SimHash: a 64-bit fingerprint whose Hamming distance tracks cosine similarity.

Charikar, "Similarity estimation techniques from rounding algorithms", STOC 2002; as used for
near-duplicate web pages by Manku, Jain and Das Sarma, WWW 2007. Every feature hash votes on
each of the 64 bits: +weight where its bit is 1, -weight where it is 0; bit i of the
fingerprint is 1 when the total for bit i is strictly positive (``(fingerprint >> i) & 1``).

The sparse variant (``top_n``) sets exactly the ``top_n`` bits with the largest totals (ties go
to the lower bit), after the "top N sums" output of the htm.core SimHash document encoder.
Unweighted totals are exact integers; weighted totals are float64 sums in a fixed order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

BITS = 64
_GROUP_FEATURES = 1 << 15  # features per vectorised step of a batch: bounds temporary memory


def _bit_matrix(hashes: NDArray[np.uint64]) -> NDArray[np.uint8]:
    """(n, 64) matrix of the bits of each hash, column i holding bit i."""
    little = hashes.astype("<u8", copy=False)
    return np.unpackbits(little.view(np.uint8), bitorder="little").reshape(-1, BITS)


def _pack(bits: NDArray[np.bool_]) -> NDArray[np.uint64]:
    packed = np.packbits(bits, axis=-1, bitorder="little")
    return packed.view("<u8").reshape(bits.shape[:-1]).astype(np.uint64)


def _select_bits(
    totals: NDArray[np.float64] | NDArray[np.int64],
    count: NDArray[np.float64] | NDArray[np.int64],
    top_n: int | None,
) -> NDArray[np.bool_]:
    """Fingerprint bits from per-bit totals; ``count`` is the sum of weights per document."""
    if top_n is None:
        result: NDArray[np.bool_] = 2 * totals > count[:, None]
        return result
    order = np.argsort(-(2 * totals - count[:, None]), axis=1, kind="stable")[:, :top_n]
    chosen = np.zeros(totals.shape, dtype=bool)
    np.put_along_axis(chosen, order, True, axis=1)
    return chosen


def check_top_n(top_n: int | None) -> None:
    if top_n is not None and not (isinstance(top_n, int) and 1 <= top_n < BITS):
        raise ValueError(f"top_n must be an integer from 1 to 63 or None, got {top_n!r}")


def simhash(
    hashes: NDArray[np.uint64],
    weights: NDArray[np.float64] | None = None,
    *,
    top_n: int | None = None,
) -> int | None:
    """The 64-bit SimHash of one document's feature hashes, or ``None`` when it has none.

    Unsigned, the form of the maths; an index's API and SQL take the signed form
    (:func:`simindex.core.bits.to_signed`).

    Parameters:
        hashes: one uint64 per feature occurrence (see :mod:`simindex.core.text`).
        weights: optional weight per feature (e.g. IDF); default 1 each, i.e. term frequency.
        top_n: set exactly this many bits (sparse variant) instead of the sign rule.
    """
    fingerprints, present = simhash_batch(
        [hashes], None if weights is None else [weights], top_n=top_n
    )
    return int(fingerprints[0]) if present[0] else None


def simhash_batch(
    documents: Sequence[NDArray[np.uint64]],
    weights: Sequence[NDArray[np.float64]] | None = None,
    *,
    top_n: int | None = None,
) -> tuple[NDArray[np.uint64], NDArray[np.bool_]]:
    """SimHash of many documents at once, vectorised across documents.

    Returns ``(fingerprints, present)``: ``present[i]`` is False (and ``fingerprints[i]`` 0)
    for a document without features.
    """
    check_top_n(top_n)
    if weights is not None and len(weights) != len(documents):
        raise ValueError(f"got {len(weights)} weight arrays for {len(documents)} documents")
    sizes = np.fromiter(map(len, documents), np.int64, len(documents))
    flat_weights = None
    if weights is not None:
        for i, (row, size) in enumerate(zip(weights, sizes.tolist(), strict=True)):
            if len(row) != size:
                raise ValueError(f"document {i}: {len(row)} weights for {size} features")
        flat_weights = _joined([np.asarray(row, np.float64) for row in weights], np.float64)
    features = _joined([np.asarray(row, np.uint64) for row in documents], np.uint64)
    return simhash_concatenated(features, sizes, flat_weights, top_n=top_n)


def _joined(rows: list[NDArray[Any]], dtype: type[Any]) -> NDArray[Any]:
    return np.concatenate(rows) if rows else np.zeros(0, dtype)


def simhash_concatenated(
    features: NDArray[np.uint64],
    sizes: NDArray[np.int64],
    weights: NDArray[np.float64] | None = None,
    *,
    top_n: int | None = None,
) -> tuple[NDArray[np.uint64], NDArray[np.bool_]]:
    """:func:`simhash_batch` of documents given as one array of all their features, document
    after document, and how many features each has (``weights``: one per feature, likewise).
    """
    check_top_n(top_n)
    sizes = np.asarray(sizes, np.int64)
    if int(sizes.sum()) != len(features) or (len(sizes) and sizes.min() < 0):
        raise ValueError(f"sizes add up to {int(sizes.sum())}, not to {len(features)} features")
    if weights is not None:
        if len(weights) != len(features):
            raise ValueError(f"{len(weights)} weights for {len(features)} features")
        if not np.isfinite(weights).all():
            raise ValueError("weights must be finite numbers")
    present = sizes > 0
    fingerprints = np.zeros(len(sizes), dtype=np.uint64)
    # Documents with features, in groups of about _GROUP_FEATURES features (by where each
    # starts: a group holds at most that many and one more document).
    documents = np.flatnonzero(present)
    counts = sizes[documents]
    starts = np.cumsum(counts) - counts
    cuts = np.flatnonzero(np.diff(starts // _GROUP_FEATURES)) + 1
    for group in np.split(np.arange(len(documents)), cuts):
        if not len(group):
            continue
        first, last = int(starts[group[0]]), int(starts[group[-1]] + counts[group[-1]])
        group_weights = None if weights is None else weights[first:last]
        fingerprints[documents[group]] = _simhash_group(
            features[first:last], counts[group], group_weights, top_n
        )
    return fingerprints, present


_LANE_ROWS = 255  # byte counters of up to this many 0/1 rows cannot carry into each other
_CHUNK = 16  # features added by bitwise adders into one count per bit (at most 16)
_CHUNK_RUN = 15  # chunk counts summed in bytes: 15 * 16 = 240 cannot carry either


def _bit_counts(
    bits: NDArray[np.uint8], sizes: NDArray[np.int64], run: int = _LANE_ROWS
) -> NDArray[np.int64]:
    """Per document, how many of its rows have each bit set: (documents x 64).

    Each row's 64 bytes are read as 8 uint64 words, so one addition counts 8 bits at once;
    rows are summed in runs of at most ``run`` per document (so that no byte overflows: 255
    rows of 0 or 1), then the runs per document.
    """
    lanes = bits.reshape(-1).view(np.uint64).reshape(len(bits), BITS // 8)
    runs = (sizes + run - 1) // run
    document_start = np.repeat(np.cumsum(sizes) - sizes, runs)
    run_of_document = np.arange(runs.sum()) - np.repeat(np.cumsum(runs) - runs, runs)
    partial = np.add.reduceat(lanes, document_start + run * run_of_document, axis=0)
    counts = partial.view(np.uint8).reshape(-1, BITS)
    return np.add.reduceat(counts, np.cumsum(runs) - runs, axis=0, dtype=np.int64)


def _chunked_bit_counts(
    features: NDArray[np.uint64], sizes: NDArray[np.int64]
) -> NDArray[np.int64]:
    """:func:`_bit_counts` of the features' bits, for documents of many features.

    Each document's features are padded with zeros to chunks of 16, and each chunk's 16 words
    are added bit by bit by a tree of carry-save adders (Harley and Seal's population count,
    the 64 bit positions at once) into 5 words holding the binary digits of each bit's count:
    5 words a chunk to unpack in place of 16.
    """
    chunks = (sizes + _CHUNK - 1) // _CHUNK
    ends = np.cumsum(sizes)
    padding = np.zeros(_CHUNK, np.uint64)
    parts = []
    for start, end, pad in zip(
        (ends - sizes).tolist(), ends.tolist(), (chunks * _CHUNK - sizes).tolist(), strict=True
    ):
        parts += [features[start:end], padding[:pad]]
    words = np.ascontiguousarray(np.concatenate(parts).reshape(-1, _CHUNK).T)
    digits = None
    for weight, plane in enumerate(_binary_digits(list(words))):
        unpacked = _bit_matrix(plane).reshape(-1).view(np.uint64)
        if digits is None:
            digits = unpacked
        else:
            unpacked <<= np.uint64(weight)  # each byte holds 0 or 1: shifted, at most 16
            digits += unpacked
    assert digits is not None
    return _bit_counts(digits.view(np.uint8).reshape(-1, BITS), chunks, _CHUNK_RUN)


def _binary_digits(level: list[NDArray[np.uint64]]) -> list[NDArray[np.uint64]]:
    """Words whose bit i is binary digit k of how many of ``level`` have bit i set (k = 0,
    1, ...): full adders take three words of one weight to one of it and one of the next."""
    digits = []
    while level:
        carries = []
        while len(level) >= 3:
            first, second, third = level[:3]
            del level[:3]
            either = first ^ second
            level.append(either ^ third)
            carries.append((first & second) | (either & third))
        if len(level) == 2:
            first, second = level
            level = [first ^ second]
            carries.append(first & second)
        digits.append(level[0])
        level = carries
    return digits


def _simhash_group(
    features: NDArray[np.uint64],
    sizes: NDArray[np.int64],
    weights: NDArray[np.float64] | None,
    top_n: int | None,
) -> NDArray[np.uint64]:
    """Fingerprints of documents of ``sizes`` features each (none empty), one after another."""
    if weights is None:
        if len(features) >= _CHUNK * 4 * len(sizes):  # padding to chunks costs little
            counts = _chunked_bit_counts(features, sizes)
        else:
            counts = _bit_counts(_bit_matrix(features), sizes)
        return _pack(_select_bits(counts, sizes, top_n))
    bits = _bit_matrix(features)
    # Each total is the sum of its document's weights in feature order (bincount adds in
    # index order), one bit at a time: six times faster than a reduceat over a float matrix,
    # whose order of additions numpy does not promise.
    document = np.repeat(np.arange(len(sizes)), sizes)
    columns = np.ascontiguousarray(bits.T)
    weighted = np.empty((len(sizes), BITS))
    for bit in range(BITS):
        weighted[:, bit] = np.bincount(
            document, weights=weights * columns[bit], minlength=len(sizes)
        )
    total = np.bincount(document, weights=weights, minlength=len(sizes))
    return _pack(_select_bits(weighted, total, top_n))
