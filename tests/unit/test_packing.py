from __future__ import annotations

import numpy as np
import pytest

from simindex.core.cost import minhash_cost, simhash_cost
from simindex.core.design import LshDesign, MankuDesign
from simindex.core.minhash import MinHasher
from simindex.core.packing import band_keys, packed_signatures
from simindex.core.spec import (
    DEFAULT_EXPECTED_ROWS,
    IndexSpec,
    MinHash,
    SimHash,
    refreshed,
    resolve,
)
from simindex.core.text import Shingling

TEXTS = [
    f"document {i} shares some words with its neighbours {i % 7} and {i % 3}" for i in range(50)
]


def signatures(scheme: str) -> np.ndarray:
    hasher = MinHasher(scheme, 128, 1)  # type: ignore[arg-type]
    values, _ = hasher.signature_matrix([Shingling().hashes(text) for text in TEXTS])
    return values


def test_classic_values_survive_packing_unchanged() -> None:
    values = signatures("classic")
    assert int(values.max()) < 2**31
    assert (packed_signatures(values).astype(np.int64) == values.astype(np.int64)).all()


def test_one_permutation_keeps_the_low_32_bits() -> None:
    values = signatures("one_permutation")
    packed = packed_signatures(values)
    assert packed.dtype == np.int32
    assert (packed.view(np.uint32).astype(np.uint64) == values & np.uint64(0xFFFFFFFF)).all()
    # Slots equal before are equal after; unequal ones stay unequal (here: no 2**-32 collision).
    before = values[:, None, :] == values[None, :, :]
    after = packed[:, None, :] == packed[None, :, :]
    assert (before == after).all()


def test_band_keys_agree_exactly_when_the_band_agrees() -> None:
    design = LshDesign(9, 13)
    packed = packed_signatures(signatures("classic"))
    keys = band_keys(design, packed)
    assert keys.shape == (len(TEXTS), 9) and keys.dtype == np.int32
    for band in range(9):
        values = packed[:, band * 13 : (band + 1) * 13]
        same_values = (values[:, None, :] == values[None, :, :]).all(axis=2)
        same_keys = keys[:, None, band] == keys[None, :, band]
        assert (same_values == same_keys).all()
    # The band number is part of the key: equal values in two bands give two keys.
    twice = np.tile(packed[:1, :13], (1, 2))
    assert band_keys(LshDesign(2, 13), twice)[0, 0] != band_keys(LshDesign(2, 13), twice)[0, 1]
    with pytest.raises(ValueError, match="packed signature array"):
        band_keys(design, packed[:, :100])


def test_a_simhash_design_is_sized_to_the_table() -> None:
    spec = resolve(SimHash(max_distance=4), 100)
    assert spec.sized_to_table and spec.sized_rows == 100
    assert spec.design == MankuDesign(4, 5)
    assert resolve(SimHash(max_distance=4)).sized_rows == DEFAULT_EXPECTED_ROWS
    grown = refreshed(spec, 2_000_000)
    assert grown.design == MankuDesign(4, 6) and grown.sized_rows == 2_000_000
    again = IndexSpec.from_json(grown.to_json())
    assert again == grown and again.design == MankuDesign(4, 6)
    # What the user fixed stays fixed.
    pinned = resolve(SimHash(max_distance=4, num_blocks=5))
    assert refreshed(pinned, 2_000_000) == pinned
    expected = resolve(SimHash(max_distance=4, expected_rows=100))
    assert not expected.sized_to_table and refreshed(expected, 2_000_000) == expected


def test_a_simhash_spec_of_fixed_rows_keeps_its_design() -> None:
    stored = resolve(SimHash(max_distance=4, expected_rows=1_000_000)).to_json()
    spec = IndexSpec.from_json(stored)
    assert not spec.sized_to_table and "sized_rows" not in stored
    assert refreshed(spec, 10) == spec


def test_cost_of_a_design() -> None:
    cost = minhash_cost(LshDesign(9, 13), 2048)
    assert cost.tables == 9
    assert 400 < cost.bytes_per_row < 700
    # The default design: 15 bands and a 1,792-bit sketch, 696 bytes a row and 31 for the
    # (set_hash, key) index of the queries by a large set.
    assert 500 < resolve(MinHash()).cost.bytes_per_row <= 730
    assert simhash_cost(MankuDesign(8, 10)).tables == 45
    assert resolve(SimHash(max_distance=8), 853).cost.tables == 9
    assert resolve(SimHash(max_distance=8), 1_000_000).cost.bytes_per_row > 2000
