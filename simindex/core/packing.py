"""The stored form of MinHash signatures: 32 bits of each value in an ``integer[]``, and the
band keys as 32-bit ``integer`` columns of the same row, each with its own btree (about half
the bytes of ``bigint`` values and a ``(band, hash, key)`` row per band).

Why 32 bits are enough: the ``classic`` scheme's values are below ``2**31`` already (they are
taken modulo the Mersenne prime ``2**31 - 1``), so nothing is lost. For ``one_permutation``
the low 32 bits of each 64-bit value are kept (b-bit minwise hashing with b = 32: Li and König,
"b-Bit Minwise Hashing", WWW 2010): two different minima then agree by chance with probability
``2**-32``, which moves an estimated Jaccard similarity by about ``num_perm * 2**-32`` slots --
nothing next to its own standard error (0.035 at J = 0.8 with 128 values).

A band key is xxh3-64, seeded with the band's number, of its 32-bit values' little-endian
bytes, cut to its low 32 bits. Two unrelated rows then share a band key with probability
``2**-32``: at a million rows, a query meets about one spurious candidate in 4,000 per band,
and every candidate is verified anyway.
"""

from __future__ import annotations

import numpy as np
import xxhash
from numpy.typing import NDArray

from simindex.core.design import LshDesign

_LOW_32 = np.uint64(0xFFFFFFFF)


def packed_signatures(values: NDArray[np.uint64]) -> NDArray[np.int32]:
    """Signature values as stored ``integer`` values: their low 32 bits, two's complement."""
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
    row_bytes = design.num_perm * 4
    keys = np.fromiter(
        (
            xxhash.xxh3_64_intdigest(raw[start + band * width : start + (band + 1) * width], band)
            & 0xFFFFFFFF
            for start in range(0, len(raw), row_bytes)
            for band in range(design.num_bands)
        ),
        np.uint32,
        len(packed) * design.num_bands,
    )
    return keys.view(np.int32).reshape(len(packed), design.num_bands)
