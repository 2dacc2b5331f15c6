from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simindex.core.minhash import (
    MERSENNE_PRIME,
    MinHasher,
    MinHashSignature,
    Scheme,
    _classic_coefficients,
    _mixed,
    _probe_order,
)
from simindex.core.sketch import bin_starts, bins_of
from simindex.errors import IncompatibleSignaturesError

SCHEMES = list(Scheme)


def random_sets(seed: int, size_a: int, size_b: int, shared: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    pool = rng.integers(0, 2**64, size_a + size_b - shared, dtype=np.uint64, endpoint=False)
    a = pool[:size_a]
    b = np.concatenate([pool[:shared], pool[size_a:]])
    return a, b


def exact_jaccard(a: np.ndarray, b: np.ndarray) -> float:
    sa, sb = set(a.tolist()), set(b.tolist())
    return len(sa & sb) / len(sa | sb)


def classic_reference(hasher: MinHasher, hashes: list[int]) -> list[int]:
    a, b = _classic_coefficients(hasher.num_perm, hasher.seed)
    xs = {h >> 33 for h in hashes}
    return [
        min((int(ai) * x + int(bi)) % MERSENNE_PRIME for x in xs)
        for ai, bi in zip(a, b, strict=True)
    ]


def one_permutation_reference(hasher: MinHasher, hashes: list[int]) -> list[int]:
    mixed = _mixed(np.array(sorted(set(hashes)), dtype=np.uint64), hasher.seed).tolist()
    starts = [*bin_starts(hasher.num_perm).tolist(), 2**64]
    bins: list[int | None] = [None] * hasher.num_perm
    for value in mixed:
        index = next(i for i in range(hasher.num_perm) if starts[i] <= value < starts[i + 1])
        current = bins[index]
        if current is None or value < current:
            bins[index] = value
    probes = _probe_order(hasher.num_perm, hasher.seed)
    filled = []
    for index, value in enumerate(bins):
        if value is None:
            value = next(bins[j] for j in probes[index].tolist() if bins[j] is not None)
        filled.append(value)
    return filled


@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=80), st.integers(0, 2**64 - 1))
@settings(max_examples=60)
def test_classic_matches_modular_reference(hashes: list[int], seed: int) -> None:
    hasher = MinHasher("classic", 32, seed)
    signature = hasher.signature(np.array(hashes, dtype=np.uint64))
    assert signature is not None
    assert signature.array.tolist() == classic_reference(hasher, hashes)


def test_classic_batch_across_feature_blocks_matches_the_reference() -> None:
    """Documents that start, end and straddle the blocks of features the classic scheme is
    computed in, with the extreme inputs of the modular arithmetic (x = 0, p - 1, p)."""
    rng = np.random.default_rng(11)
    extremes = [0, (2**31 - 2) << 33, 2**64 - 1, 2**33 - 1]
    documents = [
        np.array([*extremes, *rng.integers(0, 2**64, n, dtype=np.uint64).tolist()], np.uint64)
        for n in (0, 1, 1019, 1020, 1021, 2500, 3)
    ]
    documents.insert(2, np.zeros(0, np.uint64))
    hasher = MinHasher("classic", 16, 2**64 - 1)
    values, lengths = hasher.signature_matrix(documents)
    for document, row, length in zip(documents, values, lengths.tolist(), strict=True):
        expected = classic_reference(hasher, document.tolist()) if len(document) else None
        assert (row[:length].tolist() if length else None) == expected


@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=80), st.integers(1, 40))
@settings(max_examples=60)
def test_one_permutation_matches_reference(hashes: list[int], num_perm: int) -> None:
    hasher = MinHasher("one_permutation", num_perm, 3)
    signature = hasher.signature(np.array(hashes, dtype=np.uint64))
    assert signature is not None
    assert signature.array.tolist() == one_permutation_reference(hasher, hashes)


@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=80), st.integers(1, 40))
def test_bottom_k_is_the_k_smallest_distinct(hashes: list[int], k: int) -> None:
    hasher = MinHasher("bottom_k", k, 9)
    signature = hasher.signature(np.array(hashes, dtype=np.uint64))
    assert signature is not None
    mixed = _mixed(np.array(sorted(set(hashes)), dtype=np.uint64), 9).tolist()
    assert signature.array.tolist() == sorted(mixed)[:k]


@pytest.mark.parametrize("scheme", SCHEMES)
@given(
    seed=st.integers(0, 2**32),
    size_a=st.integers(20, 400),
    size_b=st.integers(20, 400),
    shared_fraction=st.floats(0.0, 1.0),
)
@settings(max_examples=40, deadline=None)
def test_estimate_within_statistical_bounds(
    scheme: Scheme, seed: int, size_a: int, size_b: int, shared_fraction: float
) -> None:
    shared = round(min(size_a, size_b) * shared_fraction)
    a, b = random_sets(seed, size_a, size_b, shared)
    hasher = MinHasher(scheme, 256, seed)
    sig_a, sig_b = hasher.signature(a), hasher.signature(b)
    assert sig_a is not None and sig_b is not None
    truth = exact_jaccard(a, b)
    # Each slot agrees with probability ~J: the binomial standard error, 5 sigma, plus slack for
    # the small dependence between one-permutation bins.
    bound = 5 * math.sqrt(truth * (1 - truth) / 256) + 0.02
    assert abs(sig_a.jaccard(sig_b) - truth) <= bound


@pytest.mark.parametrize("scheme", SCHEMES)
def test_estimates_are_unbiased_on_average(scheme: Scheme) -> None:
    errors = []
    for seed in range(200):
        a, b = random_sets(seed, 150, 150, 90)
        hasher = MinHasher(scheme, 64, seed)
        sig_a, sig_b = hasher.signature(a), hasher.signature(b)
        assert sig_a is not None and sig_b is not None
        errors.append(sig_a.jaccard(sig_b) - exact_jaccard(a, b))
    assert abs(float(np.mean(errors))) < 0.015


@pytest.mark.parametrize("scheme", SCHEMES)
def test_identical_and_disjoint_sets(scheme: Scheme) -> None:
    a, b = random_sets(1, 300, 300, 0)
    hasher = MinHasher(scheme, 128)
    sig_a, sig_b = hasher.signature(a), hasher.signature(b)
    assert sig_a is not None and sig_b is not None
    assert sig_a.jaccard(hasher.signature(a[::-1].copy())) == 1.0  # type: ignore[arg-type]
    assert sig_a.jaccard(sig_b) < 0.05


def test_bottom_k_of_small_sets_is_exact() -> None:
    a, b = random_sets(2, 30, 40, 12)
    hasher = MinHasher("bottom_k", 128)
    sig_a, sig_b = hasher.signature(a), hasher.signature(b)
    assert sig_a is not None and sig_b is not None
    assert len(sig_a.array) == 30
    assert sig_a.jaccard(sig_b) == pytest.approx(exact_jaccard(a, b))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_batch_equals_one_at_a_time(scheme: Scheme) -> None:
    rng = np.random.default_rng(3)
    documents = [
        rng.integers(0, 2**64, n, dtype=np.uint64, endpoint=False)
        for n in (0, 1, 5, 300, 0, 1000, 7)
    ]
    hasher = MinHasher(scheme, 64)
    values, lengths = hasher.signature_matrix(documents)
    for document, row, length in zip(documents, values, lengths.tolist(), strict=True):
        single = hasher.signature(document)
        if single is None:
            assert length == 0
        else:
            assert row[:length].tolist() == single.array.tolist()


def test_duplicates_do_not_count() -> None:
    hasher = MinHasher("classic", 16)
    hashes = np.array([5, 9, 2**63 + 1], dtype=np.uint64)
    assert hasher.signature(hashes) == hasher.signature(np.repeat(hashes, 4))


def test_signature_is_immutable_and_portable() -> None:
    signature = MinHasher("classic", 4).signature(np.array([1, 2, 3], dtype=np.uint64))
    assert signature is not None
    with pytest.raises(AttributeError):
        signature.values = b""  # type: ignore[misc]  # frozen
    rebuilt = MinHashSignature(Scheme.CLASSIC, 4, 1, bytes(signature.values))
    assert rebuilt == signature
    assert np.frombuffer(signature.values, "<u8").tolist() == signature.array.tolist()


@pytest.mark.parametrize(
    "other",
    [
        MinHasher("classic", 64, 1),
        MinHasher("classic", 128, 2),
        MinHasher("one_permutation", 128, 1),
    ],
)
def test_incompatible_signatures_are_refused(other: MinHasher) -> None:
    hashes = np.arange(1, 50, dtype=np.uint64)
    mine = MinHasher("classic", 128, 1).signature(hashes)
    theirs = other.signature(hashes)
    assert mine is not None and theirs is not None
    with pytest.raises(IncompatibleSignaturesError, match="cannot compare"):
        mine.jaccard(theirs)


def test_no_features_gives_no_signature() -> None:
    for scheme in SCHEMES:
        assert MinHasher(scheme).signature(np.zeros(0, dtype=np.uint64)) is None


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"scheme": "random"}, ValueError),
        ({"num_perm": 0}, ValueError),
        ({"num_perm": 1.5}, TypeError),
        ({"seed": -3}, ValueError),
    ],
)
def test_bad_parameters_are_refused(kwargs: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        MinHasher(**kwargs)  # type: ignore[arg-type]  # deliberately wrong values


def test_wrap_checks_lengths() -> None:
    with pytest.raises(ValueError, match="expected 8 values, got 3"):
        MinHasher("classic", 8).wrap(np.zeros(3, dtype=np.uint64))


@pytest.mark.parametrize("values", [1, 7, 64, 128, 1792, 4096])
def test_bins_of_is_the_last_bin_start_not_above_each_hash(values: int) -> None:
    """The arithmetic bin of a hash is the bin whose range holds it, at every bin's edges."""
    starts = bin_starts(values)
    rng = np.random.default_rng(values)
    edges = np.concatenate([starts, starts - np.uint64(1), starts + np.uint64(1)])
    extremes = np.array([0, 1, 2**63, 2**64 - 2, 2**64 - 1], np.uint64)
    hashes = np.concatenate([edges, extremes, rng.integers(0, 2**64, 5000, np.uint64)])
    expected = np.searchsorted(starts, hashes, side="right") - 1
    np.testing.assert_array_equal(bins_of(hashes, values), expected)
