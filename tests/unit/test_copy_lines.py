"""The COPY text that build's worker processes make: one line per side-table row, keys escaped."""

from __future__ import annotations

import numpy as np

from simindex.core.design import MankuDesign
from simindex.core.spec import SimHash, resolve
from simindex.db.copytext import field
from simindex.db.simhash_store import SimHashStore

KEYS = ["1", "tab\there", "back\\slash", "new\nline", "cr\rend", "é"]


def test_simhash_copy_lines_are_the_side_table_rows() -> None:
    spec = resolve(SimHash(max_distance=3, expected_rows=1_000_000))
    assert isinstance(spec.design, MankuDesign)
    store = SimHashStore("simindex", "docs", "text", spec.design)
    rng = np.random.default_rng(7)
    values = np.concatenate(
        [rng.integers(0, 2**64, len(KEYS) - 2, dtype=np.uint64), np.array([0, 2**64 - 1], "u8")]
    )
    lines = store.copy_lines(KEYS, values)
    assert lines.endswith("\n")
    rows = list(store.rows(KEYS, values))
    assert lines.split("\n")[:-1] == [
        "\t".join([field(row[0]), *map(str, row[1:])]) for row in rows
    ]
    assert store.copy_lines([], values[:0]) == ""
