from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simindex.core.bits import (
    hamming_distance,
    hamming_distances,
    to_signed,
    to_signed_array,
    to_unsigned,
    to_unsigned_array,
)

uint64s = st.integers(0, 2**64 - 1)


@given(uint64s, uint64s)
def test_signed_mapping_preserves_order_and_xor(a: int, b: int) -> None:
    assert (a < b) == (to_signed(a) < to_signed(b))
    assert to_unsigned(to_signed(a)) == a
    assert hamming_distance(to_signed(a), to_signed(b)) == hamming_distance(a, b)
    assert hamming_distance(a, b) == bin(a ^ b).count("1")


@given(st.lists(uint64s, max_size=40), uint64s)
def test_array_versions_match(values: list[int], query: int) -> None:
    array = np.array(values, dtype=np.uint64)
    signed = to_signed_array(array)
    assert signed.tolist() == [to_signed(v) for v in values]
    assert to_unsigned_array(signed).tolist() == values
    assert hamming_distances(array, query).tolist() == [hamming_distance(v, query) for v in values]


@pytest.mark.parametrize("value", [-1, 2**64])
def test_out_of_range_is_refused(value: int) -> None:
    with pytest.raises(ValueError, match="unsigned 64-bit"):
        to_signed(value)


def test_signed_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="signed 64-bit"):
        to_unsigned(2**63)
