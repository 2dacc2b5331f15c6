"""One index's trouble never stalls the others: the worker records it on that index and goes on.

Each case breaks one of two indexes (``docs`` of documents, ``notes`` of notes) in a way an app
or a DBA might (drop the table, change the text column's type, revoke a right, store invalid
UTF-8)
and proves that the other index is synced, the broken one is marked in the catalog (``stats``,
``check``) with its entries still queued, and the report says so.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from simindex import check, sync
from simindex.db.schema import migrate
from simindex.index import Index, create_index
from simindex.ops.queue import failed_items, queue_counts
from tests.postgres import Server

_roles = itertools.count(1)


def run(dsn: str, *statements: str) -> None:
    with psycopg.connect(dsn) as conn:
        for query in statements:
            conn.execute(query)


def scalar(dsn: str, query: str) -> Any:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None
    return row[0]


def broken(dsn: str, name: str) -> tuple[bool, str | None]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT broken, last_error FROM simindex.indexes WHERE name = %s", (name,)
        ).fetchone()
    assert row is not None
    return bool(row[0]), row[1]


def wait_for(condition: Callable[[], bool], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.fixture
def two(database_dsn: str) -> tuple[Index, Index]:
    """Indexes docs (documents.body) and notes (notes.body), built on 20 rows each, with 5
    more rows each queued."""
    run(
        database_dsn,
        "CREATE TABLE documents (id integer PRIMARY KEY, body text)",
        "CREATE TABLE notes (id integer PRIMARY KEY, body text)",
        "INSERT INTO documents SELECT i, 'document number ' || i || ' of the corpus' "
        "FROM generate_series(1, 20) AS i",
        "INSERT INTO notes SELECT i, 'a note about thing ' || i || ' in the list' "
        "FROM generate_series(1, 20) AS i",
    )
    docs = create_index(database_dsn, "docs", "documents", "body")
    notes = create_index(database_dsn, "notes", "notes", "body")
    docs.build()
    notes.build()
    queue_more(database_dsn, 21)
    return docs, notes


def queue_more(dsn: str, first: int) -> None:
    for table in ("documents", "notes"):
        run(
            dsn,
            f"INSERT INTO {table} SELECT i, 'later text ' || i || ' of {table}' "
            f"FROM generate_series({first}, {first + 4}) AS i",
        )


def assert_notes_synced_docs_broken(dsn: str, report: Any, notes: Index, error: str) -> None:
    assert report.indexed == 5 and report.failed == 0
    assert list(report.broken) == ["docs"] and error in report.broken["docs"]
    assert not report.ok
    assert queue_counts(dsn, "notes") == (0, 0)
    assert notes.stats().rows == 25
    assert queue_counts(dsn, "docs") == (5, 0)  # still queued, not failed items
    is_broken, last_error = broken(dsn, "docs")
    assert is_broken and last_error is not None and error in last_error
    assert broken(dsn, "notes") == (False, None)


def test_a_dropped_table_breaks_its_index_only(database_dsn: str, two: tuple[Index, Index]) -> None:
    docs, notes = two
    run(database_dsn, "DROP TABLE documents")
    report = sync(database_dsn)
    assert_notes_synced_docs_broken(database_dsn, report, notes, "was dropped")
    assert docs.stats().info.broken


def test_a_retyped_column_breaks_its_index_until_a_build(
    database_dsn: str, two: tuple[Index, Index]
) -> None:
    docs, notes = two
    run(database_dsn, "ALTER TABLE documents RENAME COLUMN body TO content")
    run(database_dsn, "ALTER TABLE documents ALTER COLUMN content TYPE varchar(200)")
    report = sync(database_dsn, batch_size=2)
    assert_notes_synced_docs_broken(database_dsn, report, notes, "changed type")
    stats = docs.stats()
    assert stats.info.broken and stats.queued == 5 and stats.rows == 20
    assert stats.info.state == "needs_rebuild"

    docs.build()  # made again for the table as it is
    healed = sync(database_dsn)
    assert healed.ok and docs.stats().rows == 25
    assert broken(database_dsn, "docs") == (False, None)  # a new catalog row
    assert check(database_dsn, "docs").ok and check(database_dsn, "docs").broken is None


@pytest.fixture
def worker_role(database_dsn: str) -> Iterator[str]:
    """A role with the rights a worker needs on simindex's schema, and SELECT on notes only;
    the DSN that logs in as it."""
    role = f"simindex_worker_{next(_roles)}"
    name = sql.Identifier(role)
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(name))
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(name))
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA simindex TO {}").format(name))
        conn.execute(
            sql.SQL(
                "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA simindex TO {}"
            ).format(name)
        )
        conn.execute(
            sql.SQL(
                "GRANT EXECUTE ON FUNCTION simindex.record_health_v1(text, text, text), "
                "simindex.share_index_v1(text) TO {}"
            ).format(name)
        )
        conn.execute(sql.SQL("GRANT SELECT ON notes TO {}").format(name))
    try:
        yield make_conninfo(database_dsn, user=role)
    finally:
        with psycopg.connect(database_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(name))
            conn.execute(sql.SQL("DROP ROLE {}").format(name))


def test_a_missing_right_breaks_its_index_only(
    database_dsn: str, two: tuple[Index, Index], worker_role: str
) -> None:
    _, notes = two
    report = sync(worker_role)
    assert_notes_synced_docs_broken(database_dsn, report, notes, "InsufficientPrivilege [42501]")
    found = check(database_dsn, "docs")  # a check as the owner sees the mark
    assert found.broken is not None and "permission denied" in found.broken


@pytest.fixture
def ascii_dsn(postgres_server: Server) -> Iterator[str]:
    """A fresh SQL_ASCII database (which stores any bytes), migrated; its DSN asks for UTF8,
    which PostgreSQL then checks each text against (the default, SQL_ASCII, gives bytes)."""
    name = f"ascii_{next(_roles)}"
    with psycopg.connect(postgres_server.dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        admin.execute(
            sql.SQL(
                "CREATE DATABASE {} ENCODING 'SQL_ASCII' TEMPLATE template0 "
                "LC_COLLATE 'C' LC_CTYPE 'C'"
            ).format(sql.Identifier(name))
        )
    dsn = make_conninfo(postgres_server.dsn, dbname=name, client_encoding="UTF8")
    try:
        migrate(dsn)
        yield dsn
    finally:
        with psycopg.connect(postgres_server.dsn, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def test_a_row_of_invalid_utf8_fails_alone(ascii_dsn: str) -> None:
    run(ascii_dsn, "CREATE TABLE documents (id integer PRIMARY KEY, body text)")
    docs = create_index(ascii_dsn, "docs", "documents", "body")
    docs.build()
    run(
        ascii_dsn,
        "INSERT INTO documents SELECT i, 'plain ascii text number ' || i "
        "FROM generate_series(1, 9) AS i",
        # Byte 0xff is no UTF-8: PostgreSQL refuses to send it to a UTF8 client.
        "INSERT INTO documents VALUES (5000, E'bad \\\\xff byte'::text)".replace("\\\\", "\\"),
    )
    report = sync(ascii_dsn, batch_size=100)
    assert (report.taken, report.indexed, report.failed) == (10, 9, 1)
    assert not report.ok and not report.broken
    [(key, error, attempts, _)] = failed_items(ascii_dsn, "docs")
    assert key == 5000 and attempts == 1
    assert error.startswith("read: ") and "22021" in error and "UTF8" in error
    stats = docs.stats()
    assert stats.rows == 9 and stats.failed == 1 and not stats.info.broken
    assert stats.info.last_error is not None and "key 5000" in stats.info.last_error


def test_follow_serves_the_healthy_index_while_one_is_broken(
    database_dsn: str, two: tuple[Index, Index]
) -> None:
    docs, notes = two
    run(database_dsn, "ALTER TABLE documents ALTER COLUMN body TYPE varchar(200)")
    stop = threading.Event()
    outcome: list[Any] = []

    def follow() -> None:
        try:
            outcome.append(sync(database_dsn, follow=True, stop=stop, heartbeat=0.2))
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=follow)
    worker.start()
    try:
        wait_for(lambda: queue_counts(database_dsn, "notes") == (0, 0))
        wait_for(lambda: broken(database_dsn, "docs")[0])
        run(database_dsn, "INSERT INTO notes VALUES (100, 'a note written while docs is broken')")
        wait_for(lambda: notes.stats().rows == 26)
        assert worker.is_alive() and queue_counts(database_dsn, "docs")[0] == 5

        docs.build()  # made again for the new type, its queue with it
        run(database_dsn, "INSERT INTO documents VALUES (100, 'written after the rebuild')")
        wait_for(lambda: docs.stats().rows == 26)  # retried with backoff
        assert not broken(database_dsn, "docs")[0]
    finally:
        stop.set()
        worker.join(timeout=30)
    [report] = outcome
    assert not isinstance(report, BaseException), report
    assert report.broken == {} and report.by_index["notes"].indexed == 6


def test_stats_show_rows_now_and_the_lag(database_dsn: str, two: tuple[Index, Index]) -> None:
    docs, _ = two
    run(database_dsn, "UPDATE simindex.docs_inbox SET queued_at = now() - interval '1 hour'")
    before = docs.stats()
    assert (before.rows, before.queued, before.failed) == (20, 5, 0)
    assert 3600 <= before.lag_seconds < 3600 + 60
    sync(database_dsn)
    after = docs.stats()
    assert (after.rows, after.queued, after.lag_seconds) == (25, 0, 0.0)
    assert after.info.row_count == 20  # the count at the last build
