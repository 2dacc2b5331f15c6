from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simindex.core.bits import to_signed
from simindex.core.design import (
    MIN_CANDIDATE_PROBABILITY,
    LshDesign,
    MankuDesign,
    block_widths,
    choose_lsh,
    choose_manku,
    manku_cost_table,
)
from simindex.core.minhash import MinHasher

uint64s = st.integers(0, 2**64 - 1)
designs = st.integers(0, 6).flatmap(
    lambda k: (
        st.integers(k + 1, k + 4)
        .filter(lambda b: math.comb(b, k) <= 64)
        .map(lambda b: MankuDesign(k, b))
    )
)


@st.composite
def neighbours(draw: st.DrawFn) -> tuple[MankuDesign, int, int]:
    design = draw(designs)
    value = draw(uint64s)
    flips = draw(st.sets(st.integers(0, 63), max_size=design.max_distance))
    other = value
    for bit in flips:
        other ^= 1 << bit
    return design, value, other


@given(neighbours())
@settings(max_examples=500)
def test_some_table_prefix_matches_within_k_bits(case: tuple[MankuDesign, int, int]) -> None:
    design, query, stored = case
    hits = 0
    for table in design.tables:
        low, high = table.prefix_range(query)
        if low <= table.permute(stored) <= high:
            hits += 1
            # the stored bigint lies in the stored-bigint range too (top bit set or not)
            assert to_signed(low) <= to_signed(table.permute(stored)) <= to_signed(high)
    assert hits >= 1


def test_top_bit_neighbours_are_found() -> None:
    design = MankuDesign(3, 4)
    query = 0xFFFF_0000_FFFF_0000
    stored = query ^ (1 << 63) ^ (1 << 62) ^ 1
    assert any(
        t.prefix_range(query)[0] <= t.permute(stored) <= t.prefix_range(query)[1]
        for t in design.tables
    )


@given(designs, st.lists(uint64s, min_size=1, max_size=50))
def test_permutation_is_a_bijection_and_vectorised(design: MankuDesign, values: list[int]) -> None:
    array = np.array(values, dtype=np.uint64)
    for table in design.tables:
        permuted = [table.permute(v) for v in values]
        assert table.permute_array(array).tolist() == permuted
        assert [v.bit_count() for v in permuted] == [v.bit_count() for v in values]
        assert len(set(permuted)) == len(set(values))


def test_tables_cover_every_choice_of_blocks() -> None:
    design = MankuDesign(3, 6)
    assert design.table_count == 20 == len(design.tables)
    assert sorted(t.prefix_bits for t in design.tables)[0] == 31
    assert sorted(t.prefix_bits for t in design.tables)[-1] == 33
    assert len({t.order[:3] for t in design.tables}) == 20


def test_block_widths_sum_to_64() -> None:
    for blocks in range(1, 65):
        widths = block_widths(blocks)
        assert sum(widths) == 64 and max(widths) - min(widths) <= 1


def test_expected_candidates_scale_with_rows() -> None:
    design = MankuDesign(3, 4)
    assert design.expected_candidates(2**20) == pytest.approx(4 * 2**20 / 2**16)


def test_chooser_prefers_more_tables_only_when_rows_grow() -> None:
    small, large = choose_manku(3, 1_000_000), choose_manku(3, 100_000_000)
    assert small.num_blocks < large.num_blocks
    table = manku_cost_table(3, 1_000_000)
    assert min(table, key=lambda row: row[2])[0] == small


@pytest.mark.parametrize(("k", "blocks"), [(3, 3), (-1, 2), (64, 65), (10, 40)])
def test_bad_manku_designs_are_refused(k: int, blocks: int) -> None:
    with pytest.raises(ValueError, match=r"max_distance|num_blocks|tables"):
        MankuDesign(k, blocks)


@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.7, 0.8, 0.9, 0.95])
@pytest.mark.parametrize("num_perm", [64, 128, 256])
def test_lsh_chooser_is_recall_first(threshold: float, num_perm: int) -> None:
    design = choose_lsh(threshold, num_perm)
    assert design.num_perm <= num_perm
    assert design.probability(threshold) >= MIN_CANDIDATE_PROBABILITY
    # Still a filter: pairs well below the threshold are mostly not candidates.
    assert design.probability(threshold - 0.3) < 0.5


def test_lsh_chooser_takes_the_fewest_false_positives_among_recall_first_designs() -> None:
    chosen = choose_lsh(0.8, 128)
    assert chosen == LshDesign(15, 7)
    for bands in range(1, 129):
        for rows in range(1, 128 // bands + 1):
            other = LshDesign(bands, rows)
            if other.probability(0.8) >= MIN_CANDIDATE_PROBABILITY:
                assert other.probability(0.6) >= chosen.probability(0.6) - 1e-9


def test_lsh_chooser_without_a_floor_is_the_version_1_chooser() -> None:
    # Indexes made before the recall-first chooser recorded these designs in their specs.
    assert choose_lsh(0.8, 128, min_probability=None) == LshDesign(9, 13)
    assert choose_lsh(0.5, 128, min_probability=None) == LshDesign(25, 5)
    assert choose_lsh(0.9, 128, min_probability=None) == LshDesign(5, 25)


def test_an_unreachable_floor_takes_the_most_likely_designs() -> None:
    # Two values: at best two bands of one row, a candidate with probability 0.51 at 0.3.
    assert choose_lsh(0.3, 2) == LshDesign(2, 1)


def test_lsh_weights_move_the_curve() -> None:
    careful = choose_lsh(
        0.8, 128, false_positive_weight=0.1, false_negative_weight=0.9, min_probability=None
    )
    strict = choose_lsh(
        0.8, 128, false_positive_weight=0.9, false_negative_weight=0.1, min_probability=None
    )
    assert careful.probability(0.8) > strict.probability(0.8)


@pytest.mark.parametrize("similarity", [0.3, 0.6, 0.8])
def test_candidate_probability_follows_the_s_curve(similarity: float) -> None:
    design = LshDesign(num_bands=8, rows_per_band=4)
    hasher = MinHasher("classic", design.num_perm, 11)
    pairs, collisions = 400, 0
    rng = np.random.default_rng(int(similarity * 100))
    size = 200
    shared = round(2 * size * similarity / (1 + similarity))  # |A∩B| for Jaccard s, |A|=|B|
    for _ in range(pairs):
        pool = rng.integers(0, 2**64, 2 * size - shared, dtype=np.uint64, endpoint=False)
        a, b = pool[:size], np.concatenate([pool[:shared], pool[size:]])
        values, _ = hasher.signature_matrix([a, b])
        keys = design.band_hashes(values)
        collisions += bool((keys[0] == keys[1]).any())
    expected = design.probability(shared / (2 * size - shared))
    spread = 4 * math.sqrt(expected * (1 - expected) / pairs) + 0.01
    assert abs(collisions / pairs - expected) <= spread


def test_band_hashes_depend_on_band_values_only() -> None:
    design = LshDesign(4, 2)
    values = np.arange(16, dtype=np.uint64).reshape(2, 8)
    values[1, :2] = values[0, :2]
    keys = design.band_hashes(values)
    assert keys.dtype == np.int64 and keys.shape == (2, 4)
    assert keys[0, 0] == keys[1, 0]
    assert (keys[0, 1:] != keys[1, 1:]).all()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0.0, 128), "threshold"),
        ((1.0, 128), "threshold"),
        ((0.5, 0), "num_perm"),
        ((0.5, 128, 0.0, 0.0), "weight"),
        ((0.5, 128, 0.5, 0.5, 1.5), "min_probability"),
    ],
)
def test_bad_lsh_parameters_are_refused(args: tuple[float, ...], message: str) -> None:
    *positional, floor = args if len(args) == 5 else (*args, 0.97)
    with pytest.raises(ValueError, match=message):
        choose_lsh(*positional, min_probability=floor)  # type: ignore[arg-type]
