"""MinHasher.rows computes many short documents at once: the same values as one document at a
time."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from simindex.core import minhash
from simindex.core.minhash import (
    _BATCH_DOCUMENTS,
    MinHasher,
    Scheme,
    _distinct,
    _mixed,
    set_hash,
    sketch,
)


def one_at_a_time(
    hasher: MinHasher, documents: list[NDArray[np.uint64]], sketch_bits: int
) -> NDArray[np.uint64]:
    """The stored row of each document, document by document (the per-document functions)."""
    words = sketch_bits // 64
    result = np.zeros((len(documents), hasher.num_perm + words + 1), np.uint64)
    if hasher.scheme is not Scheme.ONE_PERMUTATION:
        result[:, : hasher.num_perm] = hasher.signature_matrix(documents)[0]
    for row, hashes in enumerate(documents):
        if not len(hashes):
            continue
        distinct = _distinct(np.asarray(hashes, np.uint64))
        ordered = np.sort(_mixed(distinct, hasher.seed))
        if hasher.scheme is Scheme.ONE_PERMUTATION:
            result[row, : hasher.num_perm] = hasher._one_permutation(ordered)
        packed = sketch(ordered, sketch_bits, 1, hasher.seed)
        result[row, hasher.num_perm : -1] = packed.view(">u8")
        result[row, -1] = set_hash(distinct)
    return result


def documents(seed: int) -> list[NDArray[np.uint64]]:
    """Sizes from none to more than every bin, repeated hashes, shared hashes, extreme values."""
    rng = np.random.default_rng(seed)
    shared = rng.integers(0, 2**64, 50, dtype=np.uint64)
    found: list[NDArray[np.uint64]] = [np.array([], np.uint64)]
    for size in [1, 2, 3, 7, 20, 40, 130, 500, 2500, *rng.integers(0, 60, 300).tolist()]:
        hashes = rng.integers(0, 2**64, size, dtype=np.uint64)
        found.append(np.concatenate([hashes, hashes[: size // 3], shared[: size % 7]]))
    found.append(np.array([0, 2**64 - 1, 2**63], np.uint64))
    found.append(np.array([], np.uint64))
    return found


@pytest.mark.parametrize("batched", [None, 10**9], ids=["short-batched", "all-batched"])
@pytest.mark.parametrize("scheme", ["one_permutation", "classic"])
@pytest.mark.parametrize(
    ("num_perm", "sketch_bits"), [(128, 1792), (64, 256), (7, 64), (256, 512), (300, 64)]
)
def test_rows_equal_the_rows_made_one_document_at_a_time(
    scheme: str, num_perm: int, sketch_bits: int, batched: int | None, monkeypatch: Any
) -> None:
    """rows() as it runs (short texts batched, long ones alone), and with every text batched:
    the batch's values are those of one text at a time at every size."""
    if batched is not None:
        monkeypatch.setattr(minhash, "_BATCHED", batched)
    hasher = MinHasher(scheme, num_perm, seed=3)  # type: ignore[arg-type]
    docs = documents(num_perm)
    assert len(docs) > _BATCH_DOCUMENTS  # more than one batch
    values, lengths = hasher.rows(docs, sketch_bits)
    np.testing.assert_array_equal(values, one_at_a_time(hasher, docs, sketch_bits))
    assert lengths.tolist() == [num_perm if len(d) else 0 for d in docs]
