"""The one mapping between unsigned 64-bit fingerprints and PostgreSQL's signed ``bigint``.

PostgreSQL has no unsigned 64-bit type. Fingerprints and permuted prefixes are stored as
``bigint`` through an *order-preserving* mapping: ``signed = unsigned - 2**63``. Flipping the
top bit keeps sorted order, so a range of unsigned values is the same range of stored values,
and XOR of two stored values equals XOR of the originals (the flipped bits cancel), so Hamming
distances computed in SQL need no conversion back.

**The one form of a fingerprint in simindex's API is the signed ``bigint``**: what the SQL
functions take, what ``Index.fingerprint`` and ``simindex fingerprint`` give, and what
``Index.near(fingerprint=)`` and ``simindex.sqlalchemy.near(..., fingerprint=)`` take. Only the
maths of :mod:`simindex.core.simhash` works in the unsigned form; :func:`to_signed` converts,
and :func:`check_fingerprint` refuses a value that can only be unsigned.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

BITS = 64
MAX_UNSIGNED = (1 << BITS) - 1
_OFFSET = 1 << (BITS - 1)
_TOP_BIT = np.uint64(_OFFSET)


def to_signed(value: int) -> int:
    """Map an unsigned 64-bit value to the ``bigint`` that sorts in the same place."""
    if not 0 <= value <= MAX_UNSIGNED:
        raise ValueError(f"expected an unsigned 64-bit value, got {value}")
    return value - _OFFSET


def to_unsigned(value: int) -> int:
    """Inverse of :func:`to_signed`."""
    if not -_OFFSET <= value < _OFFSET:
        raise ValueError(f"expected a signed 64-bit value, got {value}")
    return value + _OFFSET


def check_fingerprint(value: object, what: str = "fingerprint") -> int:
    """``value`` if it is a fingerprint in the API's form, a signed 64-bit ``int``;
    TypeError or ValueError (which says how to convert an unsigned value) otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int (a signed bigint), got {type(value).__name__}")
    if _OFFSET <= value <= MAX_UNSIGNED:
        raise ValueError(
            f"{what} must be a signed 64-bit int (the form Index.fingerprint gives and the SQL "
            f"functions take), got the unsigned {value}: pass "
            f"simindex.fingerprint.to_signed({value})"
        )
    if not -_OFFSET <= value < _OFFSET:
        raise ValueError(f"{what} must be a signed 64-bit int, got {value}")
    return value


def to_signed_array(values: NDArray[np.uint64]) -> NDArray[np.int64]:
    """Vectorised :func:`to_signed`."""
    return np.bitwise_xor(values, _TOP_BIT).view(np.int64)


def to_unsigned_array(values: NDArray[np.int64]) -> NDArray[np.uint64]:
    """Vectorised :func:`to_unsigned`."""
    return np.bitwise_xor(values.view(np.uint64), _TOP_BIT)


def hamming_distance(a: int, b: int) -> int:
    """Number of differing bits of two fingerprints (signed or unsigned, not mixed)."""
    return ((a ^ b) & MAX_UNSIGNED).bit_count()


def hamming_distances(values: NDArray[np.uint64], query: int) -> NDArray[np.uint8]:
    """Hamming distance of every value to ``query``, vectorised."""
    return np.bitwise_count(np.bitwise_xor(values, np.uint64(query)))
