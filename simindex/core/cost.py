"""What an index costs before it is built: side tables (Manku tables or LSH bands) and bytes
a row, from PostgreSQL's storage layout.

A heap row is a 24-byte header plus its columns, padded to 8 bytes, plus a 4-byte line
pointer, as many whole rows to an 8 kB page (after its 24-byte header) as fit; a btree entry
is an 8-byte header plus its columns, padded to 8 bytes, plus a line pointer, in leaves a
fresh ``CREATE INDEX`` fills to 90%. Keys are taken as 8 bytes (bigint).
The benchmark ``benchmarks/storage.py`` compares these estimates with measured sizes.
"""

from __future__ import annotations

from dataclasses import dataclass

from simindex.core.design import LshDesign, MankuDesign

_KEY = 8
_PAGE = 8192
_PAGE_HEADER = 24
_HEAP_HEADER = 24
_INDEX_HEADER = 8
_LINE_POINTER = 4
_LEAF_FILL = 0.9


def _aligned(size: int) -> int:
    return (size + 7) // 8 * 8


def _heap(columns: int) -> float:
    """A page's bytes over the whole rows it holds (24 rows of 340 bytes leave 8 unused)."""
    rows_a_page = (_PAGE - _PAGE_HEADER) // (_aligned(_HEAP_HEADER + columns) + _LINE_POINTER)
    return _PAGE / max(rows_a_page, 1)


def _btree(columns: int) -> float:
    return (_aligned(_INDEX_HEADER + columns) + _LINE_POINTER) / _LEAF_FILL


@dataclass(frozen=True, slots=True)
class Cost:
    """``tables``: Manku tables or LSH bands (one btree each); ``bytes_per_row``: heap and
    indexes of the side tables, per indexed row."""

    tables: int
    bytes_per_row: float

    def bytes_for(self, rows: int) -> float:
        return self.bytes_per_row * rows


def simhash_cost(design: MankuDesign) -> Cost:
    """One row (key, fingerprint, one permuted copy per table); a covering btree per table."""
    tables = design.table_count
    row = _heap(_KEY + 8 + 8 * tables)
    indexes = tables * _btree(8 + 8 + _KEY) + _btree(_KEY)
    return Cost(tables, row + indexes)


def minhash_cost(design: LshDesign, sketch_bits: int) -> Cost:
    """One row (key, shingle set hash, one-bit sketch, one 32-bit band key per band), a btree
    per band, the first on (band key, set hash, key), and the primary key."""
    bands = design.num_bands
    row = _heap(_KEY + 8 + 8 + sketch_bits // 8 + 4 * bands)
    indexes = (bands - 1) * _btree(4) + _btree(4 + 8 + _KEY) + _btree(_KEY)
    return Cost(bands, row + indexes)
