"""Word shingle hashes of a whole batch of texts at once (layer 1, no I/O).

The values are those of :meth:`simindex.core.text.Shingling.hashes`, text by text (a property
test holds them to it); only the work is arranged differently, so that no Python object is
made per token or per shingle:

* every text becomes the UTF-8 bytes of its tokens separated by spaces, by byte translation
  (ASCII text) or, for other text, by classifying each distinct non-ASCII character once and
  rewriting the bytes with array operations (a CJK character gets spaces around it);
* the texts are joined into one buffer and its tokens found as (start, length) ranges;
* each range is hashed by the vectorised XXH3 of :mod:`simindex.core.xxh3` (the same values
  as the library), and runs of ``size`` unit hashes are combined as in ``combine_ngrams``,
  never across two texts.

Only plain word shingling takes this path (:func:`batchable`); the token options, character
shingles and user tokenizers keep the per-text path (:func:`hashes_batch` takes either).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator, Sequence

import numpy as np
from numpy.typing import NDArray

from simindex.core.text import (
    _ASCII_LOWER_SEPARATORS,
    _COMBINE,
    _KANA_MARKS,
    _TOKEN_CHARACTERS,
    EMPTY,
    Shingling,
    _patterns,
    combine_ngrams,
    fmix64,
)
from simindex.core.xxh3 import xxh3_64_ranges

_SPACE = 32
_KEEP, _SEPARATOR, _CJK = 0, 1, 2
_GROUP_CHARACTERS = 1 << 17
_KANA_MARK_BYTES = tuple(mark.encode("utf-8") for mark in _KANA_MARKS)
_KANA_MARK_CODES = np.array([ord(mark) for mark in _KANA_MARKS], np.uint32)
_FEW_NON_ASCII = 32  # at most one extra UTF-8 byte in this many characters: fold piecewise
# The separators of UTF-8 text, and ASCII capitals lowercased (casefold is lower() on ASCII).
_UTF8_LOWER_SEPARATORS = bytes(c if c >= 0x80 else _ASCII_LOWER_SEPARATORS[c] for c in range(256))


def hashes_batch(shingling: Shingling, texts: Sequence[str | None]) -> list[NDArray[np.uint64]]:
    """The feature hashes of each text, ``[shingling.hashes(text) for text in texts]``: plain
    word shingles of the whole batch at once, any other shingling text by text."""
    if batchable(shingling):
        return word_hashes(shingling, texts)
    return [shingling.hashes(text) for text in texts]


def hashes_concatenated(
    shingling: Shingling, texts: Sequence[str | None]
) -> tuple[NDArray[np.uint64], NDArray[np.int64]]:
    """The feature hashes of all texts in one array, text after text, and how many each text
    has: :func:`hashes_batch` without cutting the array, for computations of the whole batch."""
    if batchable(shingling):
        return word_hashes_concatenated(shingling, texts)
    rows = [shingling.hashes(text) for text in texts]
    counts = np.fromiter(map(len, rows), np.int64, len(rows))
    return (np.concatenate(rows) if rows else EMPTY), counts


def batchable(shingling: Shingling) -> bool:
    """Whether :func:`word_hashes` computes this shingling's features."""
    return shingling.unit == "word" and shingling.plain and not shingling.with_characters


def _kind(code: int) -> int:
    value = _TOKEN_CHARACTERS[code]
    if value == code:
        return _KEEP
    return _SEPARATOR if value == " " else _CJK


def _folded(text: str) -> bytes:
    """``unicodedata.normalize("NFKC", text).casefold()`` in UTF-8, up to the case of ASCII
    letters (lowercased with the separators later).

    A text with few non-ASCII characters is normalised only around them: NFKC may be applied
    piecewise between pieces cut before an ASCII character (combining class 0 and NFKC_QC=Yes:
    it never composes with what precedes it), and casefolding maps each character alone. Each
    piece is a run of non-ASCII characters with the character before it, which they may
    compose with (``e`` and a combining acute accent).
    """
    data = text.encode("utf-8", "surrogatepass")
    if (len(data) - len(text)) * _FEW_NON_ASCII > len(text):
        return unicodedata.normalize("NFKC", text).casefold().encode("utf-8", "surrogatepass")
    high = np.frombuffer(b" " + data + b" ", np.uint8) >= 0x80
    # Where a run of non-ASCII bytes starts and ends alternate, starting with a start.
    bounds = np.flatnonzero(high[1:] != high[:-1])
    starts = np.maximum(bounds[::2] - 1, 0)
    ends = bounds[1::2]
    parts = []
    last = 0
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        piece = data[start:end].decode("utf-8", "surrogatepass")
        folded = unicodedata.normalize("NFKC", piece).casefold()
        parts += [data[last:start], folded.encode("utf-8", "surrogatepass")]
        last = end
    parts.append(data[last:])
    return b"".join(parts)


def _kana_tokens(text: str) -> bytes:
    """The tokens of a text whose folded form holds Kana voiced sound marks, by the regex:
    the marks follow its own precedence only through it."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    found = _patterns().token.findall(folded)
    return b" ".join(token.encode("utf-8", "surrogatepass") for token in found)


def _token_buffer(texts: Sequence[str | None]) -> tuple[bytes, NDArray[np.int64]]:
    """All tokens of all texts in one buffer, separated by spaces, and where each text's part
    ends in it."""
    pieces = []
    for text in texts:
        if text is None:
            pieces.append(b"")
        elif not isinstance(text, str):
            raise TypeError(f"expected str text, got {type(text).__name__}")
        elif text.isascii():
            pieces.append(text.encode("ascii"))
        else:
            pieces.append(_folded(text))
    sizes = np.fromiter(map(len, pieces), np.int64, len(pieces))
    ends = np.cumsum(sizes + 1) - 1
    buffer = b" ".join(pieces).translate(_UTF8_LOWER_SEPARATORS)
    if buffer.isascii():
        return buffer, ends
    return _non_ascii_tokens(buffer, ends, texts)


def _non_ascii_tokens(
    buffer: bytes, ends: NDArray[np.int64], texts: Sequence[str | None]
) -> tuple[bytes, NDArray[np.int64]]:
    """The buffer with its non-ASCII separators made spaces and spaces around each CJK
    character; each distinct non-ASCII character is classified once."""
    data = np.frombuffer(buffer + bytes(3), np.uint8)
    leads = np.flatnonzero(data >= 0xC0)  # the first byte of each non-ASCII character
    first = data[leads].astype(np.uint32)
    width = 2 + (first >= 0xE0) + (first >= 0xF0)
    rest = [data[leads + k].astype(np.uint32) & 0x3F for k in (1, 2, 3)]
    codes = np.where(
        width == 2,
        ((first & 0x1F) << 6) | rest[0],
        np.where(
            width == 3,
            ((first & 0x0F) << 12) | (rest[0] << 6) | rest[1],
            ((first & 0x07) << 18) | (rest[0] << 12) | (rest[1] << 6) | rest[2],
        ),
    )
    distinct, inverse = np.unique(codes, return_inverse=True)
    if np.isin(distinct, _KANA_MARK_CODES).any():
        return _with_kana_marks(texts)
    kinds = np.array([_kind(code) for code in distinct.tolist()], np.int8)[inverse]
    out = data[: len(buffer)].copy()
    separators = kinds == _SEPARATOR
    for k in range(4):
        out[leads[separators & (width > k)] + k] = _SPACE
    cjk = np.flatnonzero(kinds == _CJK)
    if not len(cjk):
        return out.tobytes(), ends
    around = np.sort(np.concatenate([leads[cjk], leads[cjk] + width[cjk]]))
    return np.insert(out, around, _SPACE).tobytes(), ends + np.searchsorted(around, ends)


def _with_kana_marks(texts: Sequence[str | None]) -> tuple[bytes, NDArray[np.int64]]:
    """The token buffer of texts some of which hold Kana voiced sound marks: text by text."""
    pieces = []
    for text in texts:
        if not text:
            pieces.append(b"")
        elif text.isascii():
            pieces.append(text.encode("ascii").translate(_UTF8_LOWER_SEPARATORS))
        elif any(mark in _folded(text) for mark in _KANA_MARK_BYTES):
            pieces.append(_kana_tokens(text))
        else:
            pieces.append(_token_buffer([text])[0])
    sizes = np.fromiter(map(len, pieces), np.int64, len(pieces))
    return b" ".join(pieces), np.cumsum(sizes + 1) - 1


def word_hashes(shingling: Shingling, texts: Sequence[str | None]) -> list[NDArray[np.uint64]]:
    """``[shingling.hashes(text) for text in texts]``, computed for the batch at once."""
    result: list[NDArray[np.uint64]] = []
    for features, counts in _groups(shingling, texts):
        result += np.split(features, np.cumsum(counts)[:-1])
    return result


def word_hashes_concatenated(
    shingling: Shingling, texts: Sequence[str | None]
) -> tuple[NDArray[np.uint64], NDArray[np.int64]]:
    """:func:`word_hashes` as one array, text after text, and how many hashes each text has."""
    groups = list(_groups(shingling, texts))
    if len(groups) == 1:
        return groups[0]
    if not groups:
        return EMPTY, np.zeros(0, np.int64)
    return np.concatenate([f for f, _ in groups]), np.concatenate([c for _, c in groups])


def _groups(
    shingling: Shingling, texts: Sequence[str | None]
) -> Iterator[tuple[NDArray[np.uint64], NDArray[np.int64]]]:
    """The shingle hashes of the texts and their counts, a group of texts at a time."""
    if not batchable(shingling):
        raise ValueError("word_hashes computes plain word shingles only")
    first = 0
    while first < len(texts):
        # Groups of about _GROUP_CHARACTERS characters: the arrays of a group stay in cache.
        last, characters = first, 0
        while last < len(texts) and (last == first or characters < _GROUP_CHARACTERS):
            characters += len(texts[last] or "")
            last += 1
        yield _group_hashes(shingling, texts[first:last])
        first = last


def _group_hashes(
    shingling: Shingling, texts: Sequence[str | None]
) -> tuple[NDArray[np.uint64], NDArray[np.int64]]:
    buffer, text_ends = _token_buffer(texts)
    inside = np.frombuffer(b" " + buffer + b" ", np.uint8) != _SPACE
    # Where a token starts and where it ends alternate, starting with a start. (Booleans
    # compared: numpy finds the nonzero entries of a bool array several times faster.)
    bounds = np.flatnonzero(inside[1:] != inside[:-1])
    starts = bounds[::2].copy()
    lengths = bounds[1::2] - starts
    units = xxh3_64_ranges(buffer, starts, lengths, shingling.seed)
    counts = np.diff(np.searchsorted(starts, text_ends), prepend=0)
    return _ngrams(units, counts, shingling.size)


def _ngrams(
    units: NDArray[np.uint64], counts: NDArray[np.int64], size: int
) -> tuple[NDArray[np.uint64], NDArray[np.int64]]:
    """The shingle hashes of texts of ``counts[i]`` unit hashes each (``combine_ngrams`` per
    text), text after text, and how many each text has."""
    if size == 1:
        return units, counts
    windows = max(len(units) - size + 1, 0)
    combined = units[:windows].copy()
    for offset in range(1, size):
        combined *= _COMBINE
        combined += units[offset : offset + windows]
    fmix64(combined)
    # Keep the windows that start and end inside one text: drop the size - 1 windows that
    # start before each text's end and run past it.
    kept = np.maximum(counts - size + 1, 0)
    crossing = (np.cumsum(counts)[:, None] - np.arange(1, size)).ravel()
    inside = np.ones(windows, np.bool_)
    inside[crossing[(crossing >= 0) & (crossing < windows)]] = False
    shingles = combined[inside]
    # A text of fewer units than ``size`` (but some) has one shingle of all its units.
    short = np.flatnonzero((counts > 0) & (counts < size))
    if len(short):
        offsets = np.cumsum(counts) - counts
        values = [
            combine_ngrams(units[start : start + count], size)[0]
            for start, count in zip(offsets[short].tolist(), counts[short].tolist(), strict=True)
        ]
        shingles = np.insert(shingles, (np.cumsum(kept) - kept)[short], values)
        kept[short] = 1
    return shingles, kept
