"""A SimHash design sized to the table: chosen for the source's rows at create, and again for
the real count by each build, which then swaps in new side-table columns and functions."""

from __future__ import annotations

import random

import numpy as np
import psycopg

from simindex import sync
from simindex.core.bits import hamming_distance
from simindex.core.design import MankuDesign
from simindex.core.spec import SimHash
from simindex.index import create_index
from simindex.ops.check import check

WORDS = [f"w{i}" for i in range(5000)]


def texts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(count)]


def prefix_columns(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM information_schema.columns "
            "WHERE table_schema = 'simindex' AND table_name = 'notes_simhash' "
            "AND column_name ~ '^p[0-9]+$'"
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_build_chooses_the_design_for_the_real_row_count(database_dsn: str) -> None:
    first = texts(200, 1)
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE notes (id integer PRIMARY KEY, body text)")
        with conn.cursor().copy("COPY notes (id, body) FROM STDIN") as copy:
            for key, text in enumerate(first):
                copy.write_row((key, text))
    index = create_index(database_dsn, "notes", "notes", "body", method=SimHash(max_distance=8))
    info = index.info()
    assert info.spec.sized_rows == 200
    assert info.spec.design == MankuDesign(8, 9)
    index.build()
    assert prefix_columns(database_dsn) == 9 - 1  # table 0's index is on the fingerprint

    # The table grows past the size where 10 blocks (45 tables) answer faster.
    more = texts(32_000, 2)
    with psycopg.connect(database_dsn) as conn:
        with conn.cursor().copy("COPY notes (id, body) FROM STDIN") as copy:
            for key, text in enumerate(more, start=len(first)):
                copy.write_row((key, text))
        # The build below covers them.
        conn.execute("TRUNCATE simindex.notes_queue, simindex.notes_inbox")
    index.build(workers=1)
    info = index.info()
    assert info.spec.sized_rows == len(first) + len(more)
    assert info.spec.design == MankuDesign(8, 10)
    assert prefix_columns(database_dsn) == 45 - 1

    # Queries through the new functions agree with brute force.
    corpus = first + more
    values, _ = info.spec.simhash_values(corpus)
    for key in (0, 7, 150, 9000):
        distances = np.bitwise_count(values ^ values[key])
        expected = sorted(
            (int(d), k) for k, d in enumerate(distances.tolist()) if d <= 8 and k != key
        )
        found = [(m.distance, m.key) for m in index.near_key(key)]
        assert found == expected
        assert all(hamming_distance(int(values[key]), int(values[k])) == d for d, k in found)
    # Writes and deletes reach the new columns.
    with psycopg.connect(database_dsn) as conn:
        conn.execute("UPDATE notes SET body = %s WHERE id = 1", [corpus[0]])
        conn.execute("DELETE FROM notes WHERE id = 2")
    sync(database_dsn, ["notes"])
    assert 1 in {m.key for m in index.near_key(0)}
    assert check(database_dsn, "notes").ok
