"""Shingle counts: what a build learns, what it keeps, and how a spec stores and uses it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simindex.core.frequency import (
    MIN_COMMON_ROWS,
    ShingleCounts,
    check_share,
    count_shingles,
    without_common,
)
from simindex.core.spec import IndexSpec, MinHash, SimHash, refreshed, resolve


def u64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.uint64)


def test_counts_rows_not_occurrences_and_keeps_shingles_of_two_rows_or_more() -> None:
    counts = count_shingles([u64(5, 5, 5, 7), u64(5, 9), u64(5, 7), u64(), u64(11)])
    assert counts.rows == 4  # the row without features is not counted
    assert counts.hashes.tolist() == [5, 7]
    assert counts.counts.tolist() == [3, 2]


def test_stops_taking_rows_at_the_feature_budget() -> None:
    rows = iter([u64(1, 2, 3), u64(1, 2), u64(1, 9), u64(1)])
    counts = count_shingles(rows, max_features=5)
    assert counts.rows == 2 and counts.hashes.tolist() == [1, 2]
    assert next(rows).tolist() == [1, 9]  # the rest was not read


def test_keeps_the_most_common_and_among_equals_the_smaller_hash() -> None:
    rows = [u64(1, 2, 3, 4)] * 2 + [u64(3, 4)] * 3 + [u64(4)]
    counts = count_shingles(rows, kept=2)
    assert counts.hashes.tolist() == [3, 4]
    assert counts.counts.tolist() == [5, 6]
    tie = count_shingles([u64(9, 2, 5)] * 2, kept=2)
    assert tie.hashes.tolist() == [2, 5]


def test_common_is_more_than_the_share_and_more_than_the_floor() -> None:
    counts = ShingleCounts(10_000, u64(1, 2, 3), np.array([100, 200, 300], dtype=np.uint32))
    assert counts.common(0.02).tolist() == [3]
    assert counts.common(0.0199).tolist() == [2, 3]
    small = ShingleCounts(
        100, u64(1, 2, 3), np.array([2, MIN_COMMON_ROWS, MIN_COMMON_ROWS + 1], dtype=np.uint32)
    )
    assert small.common(0.01).tolist() == [3]


def kept(rows: list[list[int]], common: np.ndarray) -> list[list[int]]:
    counts = np.array([len(row) for row in rows], np.int64)
    features = u64(*(value for row in rows for value in row))
    found, found_counts = without_common(features, counts, common)
    return [part.tolist() for part in np.split(found, np.cumsum(found_counts)[:-1])]


def test_without_common_drops_every_occurrence_but_keeps_a_row_that_is_all_common() -> None:
    common = u64(3, 8)
    assert kept([[3, 4, 8, 3, 9]], common) == [[4, 9]]
    assert kept([[3, 8, 3]], common) == [[3, 8, 3]]
    assert kept([[]], common) == [[]]
    assert kept([[1, 2]], u64()) == [[1, 2]]
    assert kept([[2**64 - 1]], common) == [[2**64 - 1]]
    rows = [[3, 4, 8, 3, 9], [3, 8, 3], [], [1, 3], [8]]
    assert kept(rows, common) == [[4, 9], [3, 8, 3], [], [1], [8]]


def test_idf_of_counted_and_of_uncounted_shingles() -> None:
    counts = ShingleCounts(99, u64(10, 20), np.array([99, 9], dtype=np.uint32))
    weights = counts.idf(u64(10, 20, 30))
    assert weights.tolist() == pytest.approx(
        [1.0 + math.log(1.0), 1.0 + math.log(10.0), 1.0 + math.log(50.0)]
    )
    empty = ShingleCounts(0, u64(), np.zeros(0, np.uint32))
    assert empty.idf(u64(1)).tolist() == pytest.approx([1.0])


def test_stored_form_round_trips_and_damage_is_refused() -> None:
    counts = count_shingles([u64(1, 2**63, 2**64 - 1)] * 3 + [u64(2**63)])
    again = ShingleCounts.from_dict(counts.to_dict())
    assert again == counts and hash(again) == hash(counts)
    damaged = counts.to_dict() | {"counts": counts.to_dict()["counts"][:-8]}
    with pytest.raises(ValueError, match="damaged"):
        ShingleCounts.from_dict(damaged)


@pytest.mark.parametrize("share", [0, 1, 1.5, -0.1, float("nan")])
def test_share_out_of_range_is_refused(share: float) -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        check_share(share)
    with pytest.raises(ValueError, match="between 0 and 1"):
        resolve(MinHash(ignore_common=share))


@pytest.mark.parametrize("share", ["0.1", True])
def test_share_of_the_wrong_type_is_refused(share: object) -> None:
    with pytest.raises(TypeError, match="ignore_common"):
        resolve(SimHash(ignore_common=share))  # type: ignore[arg-type]


def test_idf_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="idf"):
        resolve(SimHash(idf=1))  # type: ignore[arg-type]


def test_a_learning_spec_round_trips_with_its_counts() -> None:
    counts = count_shingles([u64(1, 2)] * 3)
    for method in (MinHash(0.7, ignore_common=0.01), SimHash(idf=True, expected_rows=10)):
        spec = refreshed(resolve(method), 10, counts)
        assert spec.counts == counts
        again = IndexSpec.from_json(spec.to_json())
        assert again.counts == counts and again.to_json() == spec.to_json()
        assert again.method.ignore_common == spec.method.ignore_common
        assert '"shingle_counts"' in spec.to_json()


def test_a_spec_that_learns_nothing_keeps_no_counts() -> None:
    counts = count_shingles([u64(1, 2)] * 3)
    spec = refreshed(resolve(MinHash(0.7)), 10, counts)
    assert spec.counts is None
    assert "shingle_counts" not in spec.to_json()


def test_features_drop_common_shingles_only_once_counts_are_learned() -> None:
    method = MinHash(0.7, ignore_common=0.5)
    boiler = "this package contains the source for the rust crate"
    names = ["alpha", "beta", "gamma", "delta", "zeta", "eta", "theta", "iota", "kappa", "mu", "nu"]
    texts = [f"{boiler} {name} does {name} things" for name in names]
    unlearned = resolve(method)
    assert [len(f) for f in unlearned.features(texts)] == [
        len(method.shingling.hashes(t)) for t in texts
    ]
    counts = count_shingles(method.shingling.hashes(t) for t in texts)
    learned = refreshed(unlearned, len(texts), counts)
    kept = learned.features(texts)
    assert all(
        0 < len(f) < len(method.shingling.hashes(t)) for f, t in zip(kept, texts, strict=True)
    )
    assert not set(kept[0].tolist()) & set(kept[1].tolist())
    # A text that is all boilerplate keeps its shingles.
    assert len(learned.features([boiler])[0]) == len(method.shingling.hashes(boiler))


def test_idf_changes_a_simhash_only_once_counts_are_learned() -> None:
    texts = [f"the same old words and then {word} {word}" for word in ("one", "two", "three")]
    plain = resolve(SimHash(expected_rows=10))
    weighted = resolve(SimHash(expected_rows=10, idf=True))
    assert np.array_equal(plain.simhash_values(texts)[0], weighted.simhash_values(texts)[0])
    counts = count_shingles(plain.method.shingling.hashes(t) for t in texts)
    learned = refreshed(weighted, 3, counts)
    assert not np.array_equal(plain.simhash_values(texts)[0], learned.simhash_values(texts)[0])
