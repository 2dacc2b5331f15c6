"""MinHash storage: one row per document (32-bit signature, one band key column per band),
the same whether sync or a build wrote it."""

from __future__ import annotations

import random
from typing import Any

import psycopg
import pytest
from psycopg import sql

from simindex import migrate, sync
from simindex.core.packing import sketch_digits
from simindex.core.spec import SPEC_VERSION, MinHash
from simindex.db.catalog import store_of
from simindex.db.minhash_store import MinHashStore
from simindex.db.statements import statement
from simindex.index import Index, create_index
from simindex.ops.check import check
from simindex.ops.pairs import SimilarPair

WORDS = [f"w{i}" for i in range(500)]


def texts(count: int) -> list[str]:
    """Random texts; every fifth one has an exact copy and a copy with two words changed."""
    rng = random.Random(5)
    found: list[str] = []
    while len(found) < count:
        words = [rng.choice(WORDS) for _ in range(40)]
        found.append(" ".join(words))
        if len(found) % 5 == 0:
            found.append(" ".join(words))
            words[3], words[20] = "changed", "again"
            found.append(" ".join(words))
    return found[:count]


def tables(dsn: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables "
            "WHERE schemaname = 'simindex' AND tablename LIKE 'notes%'"
        ).fetchall()
    return {name for (name,) in rows}


def answers(index: Index, sample: list[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for number, text in enumerate(sample):
        found[f"text {number}"] = [(m.key, m.similarity) for m in index.similar(text)]
        found[f"key {number}"] = [(m.key, m.similarity) for m in index.similar(key=number * 7)]
    pairs = list(index.pairs())
    found["pairs"] = sorted(
        (p.left, p.right, p.similarity) for p in pairs if isinstance(p, SimilarPair)
    )
    assert len(found["pairs"]) == len(pairs)
    found["limited"] = [m.key for m in index.similar(sample[0], limit=1)]
    return found


@pytest.mark.parametrize("scheme", ["classic", "one_permutation"])
def test_rows_written_by_sync_answer_as_rows_written_by_a_build(
    database_dsn: str, scheme: str
) -> None:
    corpus = texts(400)
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE notes (id integer PRIMARY KEY, body text)")
    method = MinHash(0.7, 128, scheme)  # type: ignore[arg-type]
    index = create_index(database_dsn, "notes", "notes", "body", method=method)
    index.build()  # of no rows: ready, and every row from here on comes through the triggers
    with (
        psycopg.connect(database_dsn) as conn,
        conn.cursor().copy("COPY notes (id, body) FROM STDIN") as copy,
    ):
        for key, text in enumerate(corpus):
            copy.write_row((key, text))
    sync(database_dsn, ["notes"])  # the triggers queued every row; sync writes them
    assert isinstance(store_of(index.info()), MinHashStore)
    assert "notes_minhash" in tables(database_dsn)
    sample = [corpus[i] for i in range(0, 60, 6)]
    before = answers(index, sample)
    assert len(before["pairs"]) > 50
    assert check(database_dsn, "notes").ok

    index.build()
    with psycopg.connect(database_dsn) as conn:
        version = conn.execute("SELECT spec_version FROM simindex.indexes").fetchone()
    assert version == (SPEC_VERSION,)
    assert answers(index, sample) == before
    assert check(database_dsn, "notes").ok

    # The triggers reach the rebuilt table: writes and deletes through sync.
    with psycopg.connect(database_dsn) as conn:
        conn.execute("DELETE FROM notes WHERE id = 0")
        conn.execute("UPDATE notes SET body = %s WHERE id = 1", [corpus[2]])
    sync(database_dsn, ["notes"])
    with psycopg.connect(database_dsn) as conn:
        assert conn.execute(
            "SELECT count(*) FROM simindex.notes_minhash WHERE key = 0"
        ).fetchone() == (0,)
    assert 2 in {m.key for m in index.similar(key=1)}
    assert check(database_dsn, "notes").ok


def test_compact_rows_round_trip_and_stay_under_a_kilobyte(database_dsn: str) -> None:
    corpus = texts(2000)
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE notes (id integer PRIMARY KEY, body text)")
        with conn.cursor().copy("COPY notes (id, body) FROM STDIN") as copy:
            for key, text in enumerate(corpus):
                copy.write_row((key, text))
    # 9 bands: the design of 0.8 before the recall-first one. The default 15 x 7 takes about
    # 1.0 kB a row on large tables, more on a table this small (15 btrees' overhead).
    method = MinHash(0.8, 128, num_bands=9, rows_per_band=13)
    index = create_index(database_dsn, "notes", "notes", "body", method=method)
    index.build()
    info = index.info()
    store = store_of(info)
    assert isinstance(store, MinHashStore)
    values, _ = info.spec.minhash_values(corpus)
    held = store.stored(values)
    with psycopg.connect(database_dsn) as conn:
        columns = ", ".join(f"b{band}" for band in range(store.design.num_bands))
        rows = conn.execute(
            f"SELECT key, set_hash, ARRAY[{columns}], sketch::text"
            " FROM simindex.notes_minhash ORDER BY key"
        ).fetchall()
        size = conn.execute("SELECT pg_total_relation_size('simindex.notes_minhash')").fetchone()
    assert [row[1] for row in rows] == held.set_hashes.tolist()
    assert [row[2] for row in rows] == held.bands.tolist()
    assert [row[3] for row in rows] == [sketch_digits(sketch) for sketch in held.sketches]
    assert size is not None
    assert size[0] / len(corpus) < 1024


def test_the_estimate_in_the_plan_is_minhash_similarity_v1(database_dsn: str) -> None:
    """similar_key_v1 scores candidates by minhash_estimate, minhash_similarity_v1's operations
    written out: the two give the same value for every pair of sketches (equal, complementary,
    random, of every count of differing bits), so the two query paths answer alike."""
    migrate(database_dsn)
    rng = random.Random(11)
    bits = 1792
    pairs: list[tuple[str, str]] = []
    for differing in (0, 1, 100, 500, 896, 1000, 1791, 1792):
        a = [rng.choice("01") for _ in range(bits)]
        b = list(a)
        for place in rng.sample(range(bits), differing):
            b[place] = "1" if a[place] == "0" else "0"
        pairs.append(("".join(a), "".join(b)))
    estimate = statement("minhash_estimate", a=sql.SQL("p.a"), b=sql.SQL("p.b"))
    query = sql.SQL(
        "SELECT simindex.minhash_similarity_v1(p.a, p.b), {} "
        "FROM (SELECT %s::bit varying AS a, %s::bit varying AS b) AS p"
    ).format(estimate)
    with psycopg.connect(database_dsn) as conn:
        found = [conn.execute(query, pair).fetchone() for pair in pairs]
    assert all(row is not None and row[0] == row[1] for row in found), found
    scores = [row[0] for row in found if row is not None]
    assert (scores[0], scores[-1]) == (1.0, 0.0)
