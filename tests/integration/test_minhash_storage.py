"""MinHash storage formats: an index of format 1 (bigint signatures and band rows, as earlier
releases made them) keeps answering, and its next build moves it to format 2 with the same
answers."""

from __future__ import annotations

import json
import random
from typing import Any

import psycopg
import pytest

from simindex.core.packing import COMPACT, WIDE
from simindex.core.spec import IndexSpec, MinHash, resolve
from simindex.db.catalog import store_of
from simindex.db.compact_minhash_store import CompactMinHashStore
from simindex.db.connection import transaction
from simindex.db.minhash_store import MinHashStore
from simindex.db.objects import create_statements
from simindex.db.source import describe
from simindex.db.statements import run
from simindex.index import Index, get_index
from simindex.ops.check import check
from simindex.sync import sync

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


def format_1_index(dsn: str, method: MinHash) -> Index:
    """An index as an earlier release created it: version 1 spec without a storage format."""
    spec = IndexSpec(method, resolve(method).design, WIDE)
    stored = json.loads(spec.to_json())
    stored["spec_version"] = 1
    with transaction(dsn) as conn:
        source = describe(conn, "notes", "body")
        run(conn, create_statements("simindex", "notes", source, spec))
        conn.execute(
            "UPDATE simindex.indexes SET state = 'ready', spec = %s::jsonb, spec_version = 1",
            [json.dumps(stored)],
        )
    return get_index(dsn, "notes")


def answers(index: Index, sample: list[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for number, text in enumerate(sample):
        found[f"text {number}"] = [(m.key, m.similarity) for m in index.similar(text)]
        found[f"key {number}"] = [(m.key, m.similarity) for m in index.similar(key=number * 7)]
    found["pairs"] = sorted((p.left, p.right, p.similarity) for p in index.pairs())
    found["limited"] = [m.key for m in index.similar(sample[0], limit=1)]
    return found


@pytest.mark.parametrize("scheme", ["classic", "one_permutation"])
def test_a_format_1_index_keeps_working_and_a_build_moves_it_to_format_2(
    database_dsn: str, scheme: str
) -> None:
    corpus = texts(400)
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE notes (id integer PRIMARY KEY, body text)")
    method = MinHash(0.7, 128, scheme)  # type: ignore[arg-type]
    index = format_1_index(database_dsn, method)
    with (
        psycopg.connect(database_dsn) as conn,
        conn.cursor().copy("COPY notes (id, body) FROM STDIN") as copy,
    ):
        for key, text in enumerate(corpus):
            copy.write_row((key, text))
    sync(database_dsn, ["notes"])  # the triggers queued every row; format 1 writes them
    assert isinstance(store_of(index.info()), MinHashStore)
    assert not isinstance(store_of(index.info()), CompactMinHashStore)
    assert tables(database_dsn) >= {"notes_signatures", "notes_bands"}
    sample = [corpus[i] for i in range(0, 60, 6)]
    before = answers(index, sample)
    assert len(before["pairs"]) > 50
    assert check(database_dsn, "notes").ok

    index.build()
    info = index.info()
    assert info.spec.storage == COMPACT
    assert isinstance(store_of(info), CompactMinHashStore)
    with psycopg.connect(database_dsn) as conn:
        version = conn.execute("SELECT spec_version FROM simindex.indexes").fetchone()
    assert version == (2,)  # the version that says "storage format 2"
    assert {"notes_signatures", "notes_bands"}.isdisjoint(tables(database_dsn))
    assert "notes_minhash" in tables(database_dsn)
    # Classic values fit 32 bits; one-permutation ones lose a 2**-32 chance of a false match.
    assert answers(index, sample) == before
    assert check(database_dsn, "notes").ok

    # The triggers now reach the new table: deletes at once, writes through sync.
    with psycopg.connect(database_dsn) as conn:
        conn.execute("DELETE FROM notes WHERE id = 0")
        conn.execute("UPDATE notes SET body = %s WHERE id = 1", [corpus[2]])
        assert conn.execute(
            "SELECT count(*) FROM simindex.notes_minhash WHERE key = 0"
        ).fetchone() == (0,)
    sync(database_dsn, ["notes"])
    assert 2 in {m.key for m in index.similar(key=1)}
    assert check(database_dsn, "notes").ok


def test_compact_rows_round_trip_and_stay_under_a_kilobyte(database_dsn: str) -> None:
    corpus = texts(2000)
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE notes (id integer PRIMARY KEY, body text)")
        with conn.cursor().copy("COPY notes (id, body) FROM STDIN") as copy:
            for key, text in enumerate(corpus):
                copy.write_row((key, text))
    from simindex.index import create_index

    # 9 bands: the design of 0.8 before the recall-first one. The default 15 x 7 takes about
    # 1.0 kB a row on large tables, more on a table this small (15 btrees' overhead).
    method = MinHash(0.8, 128, num_bands=9, rows_per_band=13)
    index = create_index(database_dsn, "notes", "notes", "body", method=method)
    index.build()
    info = index.info()
    store = store_of(info)
    assert isinstance(store, CompactMinHashStore)
    values, _ = info.spec.minhash_values(corpus)
    signatures, band_keys = store.stored(values)
    with psycopg.connect(database_dsn) as conn:
        columns = ", ".join(f"b{band}" for band in range(store.design.num_bands))
        rows = conn.execute(
            f"SELECT key, signature, ARRAY[{columns}] FROM simindex.notes_minhash ORDER BY key"
        ).fetchall()
        size = conn.execute("SELECT pg_total_relation_size('simindex.notes_minhash')").fetchone()
    assert [row[1] for row in rows] == signatures.tolist()
    assert [row[2] for row in rows] == band_keys.tolist()
    assert size is not None
    assert size[0] / len(corpus) < 1024
