"""The COPY text that build's worker processes make: one line per side-table row, keys escaped."""

from __future__ import annotations

import numpy as np

from simindex.core.design import LshDesign, MankuDesign
from simindex.core.spec import MinHash, SimHash, resolve
from simindex.db.copytext import field
from simindex.db.minhash_store import MinHashStore, _band_order
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


def test_minhash_copy_order_is_the_first_band_key_then_the_set_hash() -> None:
    """A MinHash COPY writes its rows by (first band key, set hash): the copies of one text
    fill pages together. Keys with tabs and newlines are escaped, so the fields are found."""
    spec = resolve(MinHash(0.8))
    assert isinstance(spec.design, LshDesign)
    store = MinHashStore("simindex", "docs", "text", spec.design, 128, 0.8, 1792)
    texts = ["one two three four", "five six seven eight", "one two three four"] * 2
    values, _ = spec.minhash_values(texts)
    lines = store.copy_lines(KEYS, values).splitlines(keepends=True)
    ordered = sorted(lines, key=_band_order)
    rows = store.stored(values)
    expected = sorted(
        range(len(KEYS)), key=lambda i: (int(rows.bands[i][0]), int(rows.set_hashes[i]))
    )
    assert ordered == [lines[i] for i in expected]
    copies = [i for i, line in enumerate(ordered) if _band_order(line) == _band_order(lines[0])]
    assert copies == list(range(copies[0], copies[0] + 4))
