"""Queries keep working during a rebuild: from other connections, while ``build()`` runs, every
answer is the old index's complete answer (and after the swap, the new one's)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from simindex.core.spec import Method, MinHash, SimHash
from simindex.index import Index, create_index

WORDS = [f"w{i}" for i in range(3000)]
METHODS: dict[str, Method] = {"simhash": SimHash(max_distance=3), "minhash": MinHash(0.6)}
# A query that has to wait for a lock fails instead of hanging the build's progress callback.
NO_WAITING = "-c lock_timeout=3000 -c statement_timeout=10000"

Ask = Callable[[Index, psycopg.Connection[Any], str], tuple[Any, ...]]


def by_text(index: Index, conn: psycopg.Connection[Any], text: str) -> tuple[Any, ...]:
    if index.info().spec.kind == "simhash":
        return tuple(index.near(text))
    return tuple(index.similar(text))


def by_key(index: Index, conn: psycopg.Connection[Any], text: str) -> tuple[Any, ...]:
    if index.info().spec.kind == "simhash":
        return tuple(index.near_key(10))
    return tuple(index.similar(key=10, verify="estimate"))  # the index's contents alone


def by_key_exact(index: Index, conn: psycopg.Connection[Any], text: str) -> tuple[Any, ...]:
    if index.info().spec.kind == "simhash":
        return tuple(index.near_key(10))
    return tuple(index.similar(key=10, verify="exact"))


def from_sql(index: Index, conn: psycopg.Connection[Any], text: str) -> tuple[Any, ...]:
    if index.info().spec.kind == "simhash":
        query = "SELECT key, distance FROM simindex.near_key_v1('docs', 10) ORDER BY 2, 1"
    else:
        query = "SELECT key, similarity FROM simindex.similar_key_v1('docs', 10) ORDER BY 2 DESC, 1"
    return tuple(conn.execute(query).fetchall())


PATHS: dict[str, Ask] = {
    "by text": by_text,
    "by key": by_key,
    "by key, exact": by_key_exact,
    "sql": from_sql,
}


def answers(index: Index, conn: psycopg.Connection[Any], text: str) -> dict[str, Any]:
    """What the index says about row 10, by each path."""
    return {name: ask(index, conn, text) for name, ask in PATHS.items()}


def keys(answer: Any) -> set[Any]:
    return {match.key for match in answer}


def setup(dsn: str, kind: str) -> tuple[Index, str]:
    """A built index of 202 rows, then changes it does not have yet (an insert and an update
    wait in the queue), so that a rebuild changes the answers about row 10; row 10's text."""
    rng = random.Random(11)
    rows = {key: " ".join(rng.choice(WORDS) for _ in range(60)) for key in range(1, 201)}
    base = rows[10].split()
    rows[1001] = " ".join([*base, "extra"])
    rows[1002] = " ".join([*base[:30], "changed", *base[31:]])
    with psycopg.connect(dsn) as conn:
        conn.execute("CREATE TABLE documents (id integer PRIMARY KEY, body text)")
        with conn.cursor().copy("COPY documents (id, body) FROM STDIN") as copy:
            for row in rows.items():
                copy.write_row(row)
    index = create_index(dsn, "docs", "documents", "body", method=METHODS[kind])
    index.build()
    with psycopg.connect(dsn) as conn:
        conn.execute("INSERT INTO documents VALUES (2001, %s)", (rows[10],))
        conn.execute("UPDATE documents SET body = 'now about something else' WHERE id = 1001")
    return index, rows[10]


@pytest.mark.parametrize("kind", sorted(METHODS))
def test_queries_answer_from_the_old_index_during_a_rebuild(database_dsn: str, kind: str) -> None:
    building, text = setup(database_dsn, kind)
    querying = make_conninfo(database_dsn, options=NO_WAITING)
    reader = Index(querying, "docs")  # its own pooled connection, not the build's
    with psycopg.connect(querying, autocommit=True) as conn:
        old = answers(reader, conn, text)
        during: list[dict[str, Any]] = []

        def progress(done: int, total: int | None) -> None:
            during.append(answers(reader, conn, text))

        building.build(batch_size=10, workers=1, progress=progress)
        new = answers(reader, conn, text)
    assert len(during) == 21  # one per batch of 10 of the 203 rows
    assert all(answer == old for answer in during)
    assert 1001 in keys(old["by key"]) and 2001 not in keys(old["by key"])
    assert 2001 in keys(new["by key"]) and 1001 not in keys(new["by key"])
    if kind == "minhash":
        # Exact verification reads the texts as they are now: row 1001, changed since the
        # old index was built, is a candidate there but no answer.
        assert 1001 not in keys(old["by key, exact"]) and 2001 in keys(new["by key, exact"])


def sleeping(dsn: str) -> bool:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE wait_event = 'PgSleep' AND datname = current_database()"
        ).fetchone()
    return row is not None and row[0] > 0


@pytest.mark.parametrize("kind", sorted(METHODS))
def test_a_query_that_meets_the_swap_gets_a_complete_answer(database_dsn: str, kind: str) -> None:
    building, text = setup(database_dsn, kind)
    reader = Index(database_dsn, "docs")
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        old = answers(reader, conn, text)
        # The build pauses after its swap, before its commit, holding the tables' locks.
        conn.execute(
            "CREATE FUNCTION pause() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN PERFORM pg_sleep(1); RETURN NULL; END $$"
        )
        conn.execute(
            "CREATE TRIGGER pause AFTER UPDATE ON simindex.indexes FOR EACH ROW "
            "WHEN (NEW.built_at IS DISTINCT FROM OLD.built_at) EXECUTE FUNCTION pause()"
        )
    connections = {name: psycopg.connect(database_dsn, autocommit=True) for name in PATHS}
    met: dict[str, Any] = {}

    def ask(name: str) -> None:
        met[name] = PATHS[name](reader, connections[name], text)

    builder = threading.Thread(target=lambda: building.build(workers=1))
    builder.start()
    try:
        deadline = time.monotonic() + 20
        while not sleeping(database_dsn):
            assert time.monotonic() < deadline, "the build never reached its swap"
            time.sleep(0.01)
        # Each query starts during the pause and waits for the build's commit.
        askers = [threading.Thread(target=ask, args=(name,)) for name in PATHS]
        for asker in askers:
            asker.start()
        for asker in askers:
            asker.join(timeout=30)
    finally:
        builder.join(timeout=30)
        for connection in connections.values():
            connection.close()
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        new = answers(reader, conn, text)
    assert new != old
    assert set(met) == set(PATHS)
    assert all(met[name] in (old[name], new[name]) for name in PATHS), met


def typed_calls(dsn: str, kind: str) -> dict[str, tuple[str, tuple[Any, ...]]]:
    """Each SQL way to ask about row 10, with its arguments read now."""
    if kind == "simhash":
        with psycopg.connect(dsn) as conn:
            row = conn.execute("SELECT fingerprint FROM simindex.docs_simhash WHERE key = 10")
            (fingerprint,) = row.fetchone() or (None,)
        return {
            "by value": ("SELECT * FROM simindex.docs_near_v1(%s)", (fingerprint,)),
            "by key": ("SELECT * FROM simindex.docs_near_key_v1(10)", ()),
            "dispatcher": ("SELECT * FROM simindex.near_key_v1('docs', 10)", ()),
        }
    with psycopg.connect(dsn) as conn:
        columns = conn.execute(
            "SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute "
            "WHERE attrelid = 'simindex.docs_minhash'::regclass AND attname ~ '^b[0-9]+$'"
        ).fetchone()
        assert columns is not None
        values = conn.execute(
            f"SELECT sketch, ARRAY[{columns[0]}], set_hash FROM simindex.docs_minhash "
            "WHERE key = 10"
        ).fetchone()
        assert values is not None
    return {
        "by value": (
            "SELECT * FROM simindex.docs_similar_v1(%s::bit varying, %s, set_hash => %s)",
            tuple(values),
        ),
        "by key": ("SELECT * FROM simindex.docs_similar_key_v1(10)", ()),
        "dispatcher": ("SELECT * FROM simindex.similar_key_v1('docs', 10)", ()),
    }


@pytest.mark.parametrize("kind", sorted(METHODS))
def test_a_snapshot_older_than_a_rebuild_fails_as_a_serialization_failure(
    database_dsn: str, kind: str
) -> None:
    building, _ = setup(database_dsn, kind)
    calls = typed_calls(database_dsn, kind)
    for name, (query, arguments) in calls.items():
        with psycopg.connect(database_dsn) as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            assert conn.execute(query, arguments).fetchall(), name  # the snapshot, and answers
            conn.commit()
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            conn.execute("SELECT 1")  # the snapshot, older than the rebuild
            building.build(workers=1)
            with pytest.raises(psycopg.errors.SerializationFailure, match="was rebuilt"):
                conn.execute(query, arguments)
            conn.rollback()
            assert conn.execute(query, arguments).fetchall(), name  # a new snapshot answers


@pytest.mark.parametrize("kind", sorted(METHODS))
def test_the_catalog_records_the_side_table_each_build_swaps_in(
    database_dsn: str, kind: str
) -> None:
    """The query functions' swap guard compares the table they locked with the one the
    catalog row in their snapshot records: create and every build write it."""
    building, _ = setup(database_dsn, kind)
    recorded = (
        "SELECT i.side::oid, to_regclass('simindex.docs_' || i.method)::oid "
        "FROM simindex.indexes AS i WHERE i.name = 'docs'"
    )
    with psycopg.connect(database_dsn) as conn:
        side, live = conn.execute(recorded).fetchone() or (None, None)
    assert side is not None and side == live
    building.build(workers=1)
    with psycopg.connect(database_dsn) as conn:
        rebuilt, live = conn.execute(recorded).fetchone() or (None, None)
    assert rebuilt == live and rebuilt != side


def test_a_snapshot_older_than_the_index_fails_as_a_serialization_failure(
    database_dsn: str,
) -> None:
    """Its catalog row is not in the snapshot (no side table recorded): never an empty answer."""
    with psycopg.connect(database_dsn) as conn:
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        conn.execute("SELECT 1")  # the snapshot, older than the index
        setup(database_dsn, "simhash")
        with pytest.raises(psycopg.errors.SerializationFailure, match="was rebuilt"):
            conn.execute("SELECT * FROM simindex.docs_near_key_v1(10)")


@pytest.mark.parametrize("kind", sorted(METHODS))
def test_a_build_leaves_its_tables_analysed_and_all_visible(database_dsn: str, kind: str) -> None:
    """Queries plan on statistics from the first moment (the build analyses its tables before
    it commits) and read the prefix and band indexes without visiting the heap (a VACUUM after
    the commit sets the visibility map)."""
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE docs (id integer PRIMARY KEY, body text NOT NULL)")
        rng = random.Random(7)
        rows = [(i, " ".join(rng.choices(WORDS, k=40))) for i in range(3000)]
        conn.cursor().executemany("INSERT INTO docs VALUES (%s, %s)", rows)
    index = create_index(database_dsn, "docs", "docs", "body", method=METHODS[kind])
    index.build()
    with psycopg.connect(database_dsn) as conn:
        tables = conn.execute(
            """SELECT c.relname, c.relpages, c.relallvisible, c.reltuples
               FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
               WHERE n.nspname = 'simindex' AND c.relkind = 'r' AND c.relname LIKE 'docs%'
                 AND c.relpages > 0"""
        ).fetchall()
    assert tables
    for name, pages, all_visible, tuples in tables:
        assert tuples > 0, name
        # Nearly all: a page a concurrent transaction's snapshot still needs may stay unmarked.
        assert all_visible >= 0.9 * pages, (name, all_visible, pages)
