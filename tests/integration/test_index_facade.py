"""The Index facade around the operations: errors that say what to do, warnings where recall
is poor, fingerprints as SQL takes them, the catalog entry it keeps, and pooled DSNs."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine

from simindex.core.spec import MinHash, SimHash
from simindex.core.text import Shingling
from simindex.db.catalog import read_index
from simindex.db.connection import Bind, connect, engine_for, raw_connection, transaction
from simindex.errors import (
    IndexNotFoundError,
    KeyNotIndexedError,
    LowRecallWarning,
    SchemaNotMigratedError,
)
from simindex.index import Index, create_index, drop_index, get_index, list_indexes
from simindex.ops.by_key import why_not_indexed

TEXTS = [
    "the quick brown fox jumps over the lazy dog near the river bank today",
    "the quick brown fox jumps over the lazy dog near the river bank tonight",
    "a completely different sentence about databases, indexes and fingerprints",
]


@pytest.fixture
def docs(database_dsn: str) -> str:
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE docs (id integer PRIMARY KEY, body text)")
        conn.cursor().executemany(
            "INSERT INTO docs VALUES (%s, %s)", list(enumerate(TEXTS, start=1))
        )
    return database_dsn


def test_an_unmigrated_database_says_to_migrate(empty_database_dsn: str) -> None:
    with psycopg.connect(empty_database_dsn) as conn:
        conn.execute("CREATE TABLE docs (id integer PRIMARY KEY, body text)")
    calls: list[Callable[[], object]] = [
        lambda: list_indexes(empty_database_dsn),
        lambda: get_index(empty_database_dsn, "docs"),
        lambda: Index(empty_database_dsn, "docs").near_key(1),
        lambda: Index(empty_database_dsn, "docs").near("some text"),
        lambda: create_index(empty_database_dsn, "docs", "docs", "body"),
        lambda: drop_index(empty_database_dsn, "docs"),
    ]
    for call in calls:
        with pytest.raises(SchemaNotMigratedError, match=r"simindex.migrate\(engine\)"):
            call()


def test_a_key_not_in_the_index_says_why(docs: str) -> None:
    index = create_index(docs, "docs", "docs", "body")
    index.build()
    with psycopg.connect(docs) as conn:
        conn.execute("INSERT INTO docs VALUES (4, 'a row written after the build, not synced')")
    with pytest.raises(KeyNotIndexedError, match="queued and not synced yet"):
        index.near_key(4)
    with pytest.raises(KeyNotIndexedError, match="no such row"):
        index.near_key(99)
    with psycopg.connect(docs) as conn:
        conn.execute("DELETE FROM simindex.docs_inbox WHERE key = 4")
        conn.execute("INSERT INTO simindex.docs_failed (key, error) VALUES (4, 'it broke')")
    with pytest.raises(KeyNotIndexedError, match="sync failed on its row: it broke"):
        index.near_key(4)


def test_a_threshold_below_the_tuned_one_warns(docs: str) -> None:
    index = create_index(docs, "notes", "docs", "body", method=MinHash(0.8, num_perm=64))
    index.build()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        index.similar(TEXTS[0])
        index.similar(TEXTS[0], threshold=0.9)
        list(index.pairs(threshold=0.8))
    with pytest.warns(
        LowRecallWarning,
        match="was tuned for: its LSH bands find pairs that are similar only by chance",
    ):
        index.similar(TEXTS[0], threshold=0.5)
    with pytest.warns(LowRecallWarning):
        list(index.pairs(threshold=0.5))
    with pytest.warns(LowRecallWarning):
        index.clusters(threshold=0.5)


def test_fingerprint_is_what_the_sql_functions_take(docs: str) -> None:
    simhash = create_index(docs, "docs", "docs", "body")
    minhash = create_index(docs, "notes", "docs", "body", method=MinHash(0.5, num_perm=64))
    simhash.build()
    minhash.build()
    value = simhash.fingerprint(TEXTS[0])
    assert isinstance(value, int) and -(2**63) <= value < 2**63
    arguments = minhash.fingerprint(TEXTS[0])
    assert arguments is not None and not isinstance(arguments, int)
    with psycopg.connect(docs) as conn:
        stored = conn.execute("SELECT fingerprint FROM simindex.docs_simhash WHERE key = 1")
        assert stored.fetchone() == (value,)
        near = conn.execute(
            "SELECT key FROM simindex.docs_near_v1(fingerprint => %s, max_distance => 0)",
            (value,),
        )
        assert near.fetchall() == [(1,)]
        similar = conn.execute(
            "SELECT key FROM simindex.notes_similar_v1(%s::bit varying, %s) ORDER BY key",
            (arguments.sketch, list(arguments.band_keys)),
        )
        assert (1,) in similar.fetchall()
    assert simhash.fingerprint("  !!! ") is None and minhash.fingerprint("") is None


@pytest.fixture
def engine(docs: str) -> Iterator[Engine]:
    made = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(docs))
    yield made
    made.dispose()


def test_a_kept_catalog_entry_follows_a_rebuild_and_a_new_index_of_the_name(
    docs: str, engine: Engine
) -> None:
    index = Index(engine, "docs")
    create_index(docs, "docs", "docs", "body").build()
    assert [m.key for m in index.near_key(1)] == [2]
    Index(docs, "docs").build()  # another Index rebuilds: the catalog row changes
    assert [m.key for m in index.near_key(1)] == [2]
    # The same name again, with character shingles: the kept entry must not be used.
    drop_index(docs, "docs")
    method = SimHash(max_distance=3, shingling=Shingling(unit="char", size=4))
    create_index(docs, "docs", "docs", "body", method=method).build()
    fingerprint = Index(docs, "docs").fingerprint(TEXTS[2])
    assert isinstance(fingerprint, int)
    assert [m.key for m in index.near(TEXTS[2], max_distance=0)] == [3]
    assert [m.key for m in index.near(fingerprint=fingerprint, max_distance=0)] == [3]
    drop_index(docs, "docs")
    with pytest.raises(IndexNotFoundError):
        index.near_key(1)
    create_index(docs, "docs", "docs", "body", method=method).build()
    with connect(engine) as connection:  # in the caller's transaction, dropped meanwhile
        in_transaction = Index(connection, "docs")
        assert in_transaction.near_key(3) == []
        drop_index(connection, "docs")  # in the same transaction: no error aborts it
        with pytest.raises(IndexNotFoundError):
            in_transaction.near_key(3)
        assert list_indexes(connection) == []


def test_each_pooled_connection_keeps_its_cursor(docs: str, engine: Engine) -> None:
    """A pool lends its connections in turn: the kept entry keeps a cursor for each, not one
    that every other query would make again."""
    create_index(docs, "docs", "docs", "body").build()
    index = Index(engine, "docs")
    assert [m.key for m in index.near_key(1)] == [2]
    kept = index._kept
    assert kept.entry is not None
    first, second = engine.raw_connection(), engine.raw_connection()
    try:
        one, two = first.driver_connection, second.driver_connection
        assert isinstance(one, psycopg.Connection) and isinstance(two, psycopg.Connection)
        cursors = [kept.cursor(conn, kept.entry) for conn in (one, two, one, two)]
        assert cursors[0] is cursors[2] and cursors[1] is cursors[3]
        assert cursors[0] is not cursors[1] and cursors[1].connection is two
    finally:
        first.close()
        second.close()
    for _ in range(3):  # the pool lends them in turn
        assert [m.key for m in index.near_key(1)] == [2]


def test_a_dsn_string_reuses_one_pooled_connection(docs: str) -> None:
    assert engine_for(docs) is engine_for(docs)
    pids = set()
    for _ in range(5):
        with transaction(docs) as conn:
            row = conn.execute("SELECT pg_backend_pid()").fetchone()
            assert row is not None
            pids.add(row[0])
    assert len(pids) == 1
    index = create_index(docs, "docs", "docs", "body")
    index.build()
    for _ in range(3):
        index.near_key(1)
    with connect(docs) as connection:
        assert not raw_connection(connection).autocommit  # handed back as it was taken
        assert raw_connection(connection).execute("SELECT pg_backend_pid()").fetchone() == (
            pids.pop(),
        )


def raw_connection_of(pooled: Any) -> psycopg.Connection[Any]:
    conn = pooled.driver_connection
    assert isinstance(conn, psycopg.Connection)
    return conn


def test_a_dsn_strings_connections_rest_in_autocommit(docs: str) -> None:
    """A query by key takes a DSN's pooled connection as it rests, in autocommit (nothing to
    set and set back); a transaction on it is one still, rolled back when it is handed back
    unfinished, and the connection rests in autocommit again."""
    index = create_index(docs, "docs", "docs", "body")
    index.build()
    assert [m.key for m in index.near_key(1)] == [2]
    pooled = engine_for(docs).raw_connection()
    rested = raw_connection_of(pooled)
    pooled.close()
    assert rested.autocommit
    with connect(docs) as connection:
        raw = raw_connection(connection)
        assert raw is rested and not raw.autocommit
        raw.execute("CREATE TABLE public.left_unfinished ()")
        assert raw.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    pooled = engine_for(docs).raw_connection()
    try:
        assert raw_connection_of(pooled) is rested and rested.autocommit
        found = rested.execute("SELECT to_regclass('public.left_unfinished')").fetchone()
        assert found == (None,)  # rolled back when it went back to the pool
    finally:
        pooled.close()
    assert [m.key for m in index.near_key(1)] == [2]


def test_a_pooled_connection_the_server_ended_is_replaced(docs: str) -> None:
    index = create_index(docs, "docs", "docs", "body")
    index.build()
    assert [m.key for m in index.near_key(1)] == [2]
    with psycopg.connect(docs, autocommit=True) as admin:
        ended = admin.execute(
            # The timeout waits until each backend is gone, so its end is on the socket before
            # the next checkout looks (without it the test races the backend's exit).
            "SELECT count(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert ended is not None and ended[0] >= 1
    assert [m.key for m in index.near_key(1)] == [2]  # not "the connection is lost"


def test_one_fingerprint_form_is_taken_everywhere(docs: str, engine: Engine) -> None:
    """What ``fingerprint()`` gives, ``near(fingerprint=)`` (facade and SQLAlchemy) and the SQL
    function take: each row is found at distance 0 from its own fingerprint, whatever its sign."""
    from sqlalchemy import select

    from simindex.sqlalchemy import near

    texts = [
        f"row {number} says something of its own: {number * 7919} apples" for number in range(40)
    ]
    with psycopg.connect(docs) as conn:
        conn.execute("CREATE TABLE many (id integer PRIMARY KEY, body text)")
        conn.cursor().executemany("INSERT INTO many VALUES (%s, %s)", list(enumerate(texts)))
    index = create_index(docs, "many", "many", "body", method=SimHash(max_distance=3))
    index.build()
    signs: set[bool] = set()
    for key, text in enumerate(texts):
        fingerprint = index.fingerprint(text)
        assert isinstance(fingerprint, int)
        signs.add(fingerprint < 0)
        by_index = {m.key: m.distance for m in index.near(fingerprint=fingerprint)}
        assert by_index[key] == 0
        assert by_index == {m.key: m.distance for m in index.near(text)}
        selectable = near(engine, "many", fingerprint=fingerprint)
        with engine.connect() as conn:
            found = dict(conn.execute(select(selectable.c.key, selectable.c.distance)).all())
        assert found == by_index
        with psycopg.connect(docs) as conn:
            rows = conn.execute(
                "SELECT key, distance FROM simindex.many_near_v1(%s)", (fingerprint,)
            ).fetchall()
        assert dict(rows) == by_index
    assert signs == {True, False}
    with pytest.raises(ValueError, match=r"simindex\.fingerprint\.to_signed"):
        index.near(fingerprint=1 << 63)


def test_near_without_text_or_fingerprint_is_empty(docs: str) -> None:
    index = create_index(docs, "docs", "docs", "body")
    index.build()
    assert index.near(text=None) == []
    assert index.near("") == []
    with pytest.raises(TypeError, match="exactly one"):
        index.near(TEXTS[0], fingerprint=-1)


def _round_trips(trace: str) -> list[str]:
    """The statements a libpq protocol trace shows the client sending: one ``Query`` (simple
    protocol) or one ``Sync`` (extended protocol: Parse/Bind/Execute end with it) each."""
    return [
        line
        for line in trace.splitlines()
        if line.split("\t")[0] == "F" and line.split("\t")[2].split(" ")[0] in ("Query", "Sync")
    ]


@pytest.mark.parametrize("bind", ["dsn", "engine", "connection"])
@pytest.mark.parametrize("method", [SimHash(), MinHash(threshold=0.5)], ids=["simhash", "minhash"])
def test_a_query_by_key_is_one_statement_on_a_pooled_connection(
    docs: str, method: SimHash | MinHash, bind: str, tmp_path: Path
) -> None:
    """Counted on the wire (libpq's protocol trace of the connection): after the first query
    reads the catalog entry, ``near_key`` / ``similar(key=..., verify="estimate")`` send one
    statement on a DSN's pooled connection and on a caller's Engine's (no round trips to pin
    the search_path and set it back), two in a caller's transaction (the entry's check, then
    the query); a key that is not indexed is explained by one more (key_state), sent only
    then."""
    create_index(docs, "docs", "docs", "body", method=method).build()
    with psycopg.connect(docs, autocommit=True) as conn:
        conn.execute("INSERT INTO docs VALUES (7, 'a row written after the build, not synced')")
    engine = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(docs))
    callers = engine.connect()
    binds: dict[str, Bind] = {"dsn": docs, "engine": engine, "connection": callers}
    index = Index(binds[bind], "docs")

    def query(key: int) -> object:
        if isinstance(method, SimHash):
            return index.near_key(key)
        return index.similar(key=key, verify="estimate")

    try:
        query(1)  # reads the catalog entry
        if bind == "connection":
            traced = raw_connection(callers)
        else:
            pooled = (engine_for(docs) if bind == "dsn" else engine).raw_connection()
            traced = pooled.driver_connection  # type: ignore[assignment]
            pooled.close()
        assert isinstance(traced, psycopg.Connection)
        found_path, missing_path = tmp_path / "found", tmp_path / "missing"
        for path in (found_path, missing_path):
            with open(path, "w") as trace:
                traced.pgconn.trace(trace.fileno())
                traced.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
                try:
                    if path is found_path:
                        assert [found.key for found in query(1)] == [2]  # type: ignore[attr-defined]
                    else:
                        with pytest.raises(KeyNotIndexedError, match="queued and not synced yet"):
                            query(7)
                finally:
                    traced.pgconn.untrace()
    finally:
        callers.close()
        engine.dispose()
    found_sent = _round_trips(found_path.read_text())
    assert len(found_sent) == (2 if bind == "connection" else 1), found_sent
    missing_sent = _round_trips(missing_path.read_text())
    assert len(missing_sent) == len(found_sent) + 1, missing_sent


@pytest.mark.parametrize("method", [SimHash(), MinHash(threshold=0.5)], ids=["simhash", "minhash"])
def test_a_query_by_text_on_a_callers_engine_is_one_statement(
    docs: str, method: SimHash | MinHash, tmp_path: Path
) -> None:
    """On a caller's Engine, ``near(text)`` / ``similar(text, verify="estimate")`` send one
    statement, the entry's check and the query together: no round trips to pin the
    search_path and set it back, nor one for the check alone."""
    create_index(docs, "docs", "docs", "body", method=method).build()
    engine = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(docs))
    index = Index(engine, "docs")

    def query() -> list[Any]:
        if isinstance(method, SimHash):
            return [found.key for found in index.near(TEXTS[1])]
        return [found.key for found in index.similar(TEXTS[1], verify="estimate")]

    try:
        expected = query()  # reads the catalog entry
        assert 1 in expected
        assert query() == expected  # prepares the statement (a round trip of its own)
        pooled = engine.raw_connection()
        traced = pooled.driver_connection
        pooled.close()
        assert isinstance(traced, psycopg.Connection)
        path = tmp_path / "trace"
        with open(path, "w") as trace:
            traced.pgconn.trace(trace.fileno())
            traced.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
            try:
                assert query() == expected
            finally:
                traced.pgconn.untrace()
    finally:
        engine.dispose()
    sent = _round_trips(path.read_text())
    assert len(sent) == 1, sent


def test_a_key_state_read_after_the_index_was_dropped_says_so(docs: str) -> None:
    # A key found not indexed is explained by a second statement (key_state): an index dropped
    # between the two is gone, not a driver's missing table.
    index = create_index(docs, "docs", "docs", "body", method=SimHash(max_distance=3))
    index.build()
    with psycopg.connect(docs, autocommit=True) as conn:
        info = read_index(conn, "simindex", "docs")
        drop_index(docs, "docs")
        with pytest.raises(IndexNotFoundError, match="dropped during the query"):
            why_not_indexed(conn, info, 99)
