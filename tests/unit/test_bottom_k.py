"""The bottom-k cluster key against its definition, and its stability."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from simindex.core.minhash import bottom_k_key
from simindex.core.text import Shingling


def oracle(hashes: list[int], k: int) -> int | None:
    smallest = sorted(set(hashes))[:k]
    return functools.reduce(lambda a, b: a ^ b, smallest) if smallest else None


@pytest.mark.parametrize("k", [1, 2, 4, 50])
def test_matches_the_definition(k: int) -> None:
    rng = np.random.default_rng(k)
    for size in (1, 3, 10, 200):
        values = rng.integers(0, 2**64, size=size, dtype=np.uint64, endpoint=False)
        doubled = np.concatenate([values, values[: size // 2]])
        assert bottom_k_key(doubled, k) == oracle([int(v) for v in doubled], k)


def test_stable_under_changes_outside_the_k_smallest() -> None:
    shingling = Shingling()
    text = " ".join(f"word{i}" for i in range(100))
    hashes = shingling.hashes(text)
    key = bottom_k_key(hashes, 3)
    largest = np.sort(hashes)[-1]
    assert bottom_k_key(hashes[hashes != largest], 3) == key
    assert bottom_k_key(np.append(hashes, np.uint64(2**64 - 1)), 3) == key
    assert bottom_k_key(np.append(hashes, np.uint64(0)), 3) != key


def test_no_features_and_bad_k() -> None:
    assert bottom_k_key(Shingling().hashes(""), 2) is None
    with pytest.raises(ValueError, match="positive int"):
        bottom_k_key(np.array([1], np.uint64), 0)
