"""The stored form of a MinHash row (one per document, :mod:`simindex.db.minhash_store`):

* ``set_hash``: xxh3-64 of the shingle set (:func:`simindex.core.minhash.set_hash`), as a
  signed ``bigint``: rows of the same set are identical, scored 1 without their sketches,
  and exact verification knows them without reading their texts;
* ``b0``, ``b1``, ...: one 32-bit key per LSH band. A band key is xxh3-64, seeded with the
  band's number, of the little-endian bytes of the band's values (the low 32 bits of each
  signature value), cut to its low 32 bits. Two unrelated rows share a band key with
  probability ``2**-32``: at a million rows, a query meets about one spurious candidate in
  4,000 per band, and every candidate is scored anyway;
* ``sketch``: ``bit(sketch_bits)``, one bit of each of ``sketch_bits`` one-permutation bins
  (:func:`simindex.core.sketch.sketch`), written as PostgreSQL's hexadecimal bit-string
  input (``X`` and the hex digits). Two rows' bins agree with probability ``(1 + J) / 2``, so
  ``J`` is estimated as ``1 - 2 d / sketch_bits`` from the number ``d`` of differing bits,
  ``bit_count(a # b)`` (Li and König, "b-Bit Minwise Hashing", WWW 2010, with b = 1).
  ``benchmarks/minhash_format.py`` measured the bits against 32-bit values: 2,048 one-bit
  values (264 bytes) estimate with about half the error of 128 32-bit values (536 bytes).

A stored row comes from :meth:`simindex.core.minhash.MinHasher.rows`: the signature's
``num_perm`` values, then the sketch as 64-bit words, then the set hash.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from simindex.core.design import LshDesign
from simindex.core.xxh3 import xxh3_64_ranges

_LOW_32 = np.uint64(0xFFFFFFFF)


@dataclass(frozen=True, slots=True)
class StoredRows:
    """The columns of MinHash rows as the table stores them."""

    set_hashes: NDArray[np.int64]
    bands: NDArray[np.int32]
    sketches: list[str]


def packed_signatures(values: NDArray[np.uint64]) -> NDArray[np.int32]:
    """Signature values as 32-bit ``integer`` values: their low 32 bits, two's complement."""
    low = np.bitwise_and(np.asarray(values, dtype=np.uint64), _LOW_32).astype(np.uint32)
    return low.view(np.int32)


def band_keys(design: LshDesign, packed: NDArray[np.int32]) -> NDArray[np.int32]:
    """(documents x num_bands) band keys of packed signatures (see the module docstring)."""
    if packed.ndim != 2 or packed.shape[1] < design.num_perm:
        raise ValueError(
            f"expected a (documents x >= {design.num_perm}) packed signature array, "
            f"got shape {packed.shape}"
        )
    width = design.rows_per_band * 4
    raw = np.ascontiguousarray(packed[:, : design.num_perm], dtype="<i4").tobytes()
    count = len(packed) * design.num_bands
    # Row r's band b: bytes from r * num_perm * 4 + b * width, hashed with seed b.
    starts = np.add.outer(
        np.arange(len(packed), dtype=np.int64) * (design.num_perm * 4),
        np.arange(design.num_bands, dtype=np.int64) * width,
    ).ravel()
    seeds = np.tile(np.arange(design.num_bands, dtype=np.uint64), len(packed))
    hashes = xxh3_64_ranges(raw, starts, np.full(count, width, np.int64), seeds)
    keys = (hashes & _LOW_32).astype(np.uint32)
    return keys.view(np.int32).reshape(len(packed), design.num_bands)


def stored_rows(design: LshDesign, rows: NDArray[np.uint64], sketch_bits: int) -> StoredRows:
    """The stored columns of (documents x (num_perm + sketch_bits / 64 + 1)) rows."""
    words = sketch_bits // 64
    num_perm = rows.shape[1] - words - 1
    if num_perm < design.num_perm:
        raise ValueError(f"expected rows of at least {design.num_perm + words + 1} values")
    digits = np.ascontiguousarray(rows[:, num_perm : num_perm + words], dtype=">u8").tobytes().hex()
    return StoredRows(
        rows[:, -1].astype(np.uint64).view(np.int64),
        band_keys(design, packed_signatures(rows[:, :num_perm])),
        ["X" + digits[at : at + words * 16] for at in range(0, len(digits), words * 16)],
    )


def sketch_digits(sketch: str) -> str:
    """A sketch's hexadecimal input (``X...``) as PostgreSQL prints the bit string: binary."""
    return "".join(f"{int(digit, 16):04b}" for digit in sketch[1:])
