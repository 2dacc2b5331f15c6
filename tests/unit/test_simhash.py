from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simindex.core.bits import hamming_distance
from simindex.core.simhash import simhash, simhash_batch
from simindex.core.text import Shingling

hash_lists = st.lists(st.integers(0, 2**64 - 1), max_size=60)


def reference(hashes: list[int], weights: list[float] | None = None) -> int | None:
    """Charikar's rule written plainly, one bit at a time."""
    if not hashes:
        return None
    weights = weights or [1.0] * len(hashes)
    fingerprint = 0
    for bit in range(64):
        total = sum(w if (h >> bit) & 1 else -w for h, w in zip(hashes, weights, strict=True))
        if total > 0:
            fingerprint |= 1 << bit
    return fingerprint


@given(hash_lists)
def test_matches_reference(hashes: list[int]) -> None:
    assert simhash(np.array(hashes, dtype=np.uint64)) == reference(hashes)


@given(st.lists(st.tuples(st.integers(0, 2**64 - 1), st.integers(1, 50)), max_size=40))
def test_integer_weights_equal_repeated_features(pairs: list[tuple[int, int]]) -> None:
    hashes = np.array([h for h, _ in pairs], dtype=np.uint64)
    weights = np.array([w for _, w in pairs], dtype=np.float64)
    repeated = np.array([h for h, w in pairs for _ in range(w)], dtype=np.uint64)
    assert (
        simhash(hashes, weights)
        == simhash(repeated)
        == reference([h for h, _ in pairs], weights.tolist())
    )


def sequential_totals(hashes: np.ndarray, weights: np.ndarray) -> int | None:
    """The weighted rule with each total summed in feature order, as defined: weight of every
    feature whose bit is set, against half the sum of all weights."""
    if not len(hashes):
        return None
    total = 0.0
    for weight in weights.tolist():
        total += weight
    fingerprint = 0
    for bit in range(64):
        ones = 0.0
        for h, weight in zip(hashes.tolist(), weights.tolist(), strict=True):
            ones += weight * ((h >> bit) & 1)
        if 2 * ones > total:
            fingerprint |= 1 << bit
    return fingerprint


@given(
    st.lists(
        st.tuples(
            st.integers(0, 2**64 - 1), st.floats(0.0, 20.0, allow_nan=False, allow_subnormal=False)
        ),
        max_size=60,
    )
)
def test_real_weights_are_summed_in_feature_order(pairs: list[tuple[int, float]]) -> None:
    hashes = np.array([h for h, _ in pairs], dtype=np.uint64)
    weights = np.array([w for _, w in pairs], dtype=np.float64)
    assert simhash(hashes, weights) == sequential_totals(hashes, weights)


def test_weighted_batches_equal_one_at_a_time() -> None:
    rng = np.random.default_rng(7)
    arrays = [rng.integers(0, 2**64, int(n), dtype=np.uint64) for n in rng.integers(0, 3000, 40)]
    weights = [1.0 + rng.random(len(a)) * 9 for a in arrays]
    fingerprints, present = simhash_batch(arrays, weights)
    for array, weight, fingerprint, ok in zip(arrays, weights, fingerprints, present, strict=True):
        alone = simhash(array, weight)
        assert ok == (alone is not None) and int(fingerprint) == (alone or 0)


@given(st.lists(hash_lists, max_size=30))
@settings(max_examples=50)
def test_batch_equals_one_at_a_time(documents: list[list[int]]) -> None:
    arrays = [np.array(d, dtype=np.uint64) for d in documents]
    fingerprints, present = simhash_batch(arrays)
    for array, fingerprint, ok in zip(arrays, fingerprints.tolist(), present.tolist(), strict=True):
        single = simhash(array)
        assert ok == (single is not None)
        assert fingerprint == (single or 0)


def test_batch_spanning_many_groups() -> None:
    rng = np.random.default_rng(5)
    arrays = [rng.integers(0, 2**64, 5000, dtype=np.uint64, endpoint=False) for _ in range(20)]
    fingerprints, _ = simhash_batch(arrays)
    assert fingerprints.tolist() == [simhash(a) for a in arrays]


@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=60), st.integers(1, 63))
def test_top_n_sets_exactly_n_bits(hashes: list[int], top_n: int) -> None:
    fingerprint = simhash(np.array(hashes, dtype=np.uint64), top_n=top_n)
    assert fingerprint is not None
    assert fingerprint.bit_count() == top_n


def test_top_n_follows_the_largest_sums() -> None:
    # bit 0 is voted by all three, bit 1 by two, bit 2 by one: the top two are bits 0 and 1.
    hashes = np.array([0b111, 0b011, 0b001], dtype=np.uint64)
    assert simhash(hashes, top_n=2) == 0b011


def test_no_features_gives_none() -> None:
    assert simhash(np.zeros(0, dtype=np.uint64)) is None
    fingerprints, present = simhash_batch([np.zeros(0, dtype=np.uint64)] * 2)
    assert present.tolist() == [False, False]
    assert fingerprints.tolist() == [0, 0]


def test_near_duplicate_texts_are_close_and_unrelated_far() -> None:
    shingling = Shingling(size=2)
    base = " ".join(f"word{i}" for i in range(400))
    edited = base.replace("word17 ", "changed ")
    other = " ".join(f"term{i}" for i in range(400))
    a, b, c = (simhash(shingling.hashes(t)) for t in (base, edited, other))
    assert a is not None and b is not None and c is not None
    assert hamming_distance(a, b) <= 3
    assert hamming_distance(a, c) > 10


@pytest.mark.parametrize("top_n", [0, 64, 2.5])
def test_bad_top_n_is_refused(top_n: object) -> None:
    with pytest.raises(ValueError, match="top_n must be an integer from 1 to 63"):
        simhash(np.ones(3, dtype=np.uint64), top_n=top_n)  # type: ignore[arg-type]


def test_bad_weights_are_refused() -> None:
    hashes = np.ones(3, dtype=np.uint64)
    with pytest.raises(ValueError, match="2 weights for 3 features"):
        simhash(hashes, np.ones(2))
    with pytest.raises(ValueError, match="finite"):
        simhash(hashes, np.array([1.0, np.nan, 1.0]))


# Words that repeat, so that every bit count of a 16-feature chunk (0 to 16) occurs.
repeating_hashes = st.one_of(
    st.sampled_from([0, 2**64 - 1, 0x5555555555555555, 2**63, 1]), st.integers(0, 2**64 - 1)
)


@given(st.lists(st.lists(repeating_hashes, max_size=300), max_size=8))
@settings(max_examples=60, deadline=None)
def test_batches_of_long_documents_match_reference(documents: list[list[int]]) -> None:
    # Documents of 64 features or more on average are counted in chunks by bitwise adders.
    fingerprints, present = simhash_batch([np.array(d, dtype=np.uint64) for d in documents])
    expected = [reference(d) for d in documents]
    assert fingerprints.tolist() == [value or 0 for value in expected]
    assert present.tolist() == [value is not None for value in expected]


def test_long_documents_match_reference() -> None:
    rng = np.random.default_rng(11)
    for size in (254, 255, 256, 511, 1000):
        hashes = rng.integers(0, 2**64, size, dtype=np.uint64, endpoint=False)
        assert simhash(hashes) == reference(hashes.tolist())
