"""The signed/unsigned mapping of 64-bit values, at its documented import path (the code:
:mod:`simindex.core.bits`)."""

from __future__ import annotations

from simindex.core.bits import (
    BITS,
    MAX_UNSIGNED,
    check_fingerprint,
    hamming_distance,
    hamming_distances,
    to_signed,
    to_signed_array,
    to_unsigned,
    to_unsigned_array,
)

__all__ = [
    "BITS",
    "MAX_UNSIGNED",
    "check_fingerprint",
    "hamming_distance",
    "hamming_distances",
    "to_signed",
    "to_signed_array",
    "to_unsigned",
    "to_unsigned_array",
]
