"""Exact under every transaction shape: the isolation level a sync needs whatever the
database's default, and a batch a statement_timeout cancels.

(The build's side, rows written under SAVEPOINTs while it reads, is in test_build_queue.py;
random interleavings of both are in test_interleavings.py.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy import create_engine

from simindex import check, sync
from simindex.db.connection import dispose_engines
from simindex.errors import IndexBusyError
from simindex.index import Index, create_index
from simindex.ops.queue import failed_items, queue_counts


def run(dsn: str, *statements: str | sql.Composed) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for query in statements:
            conn.execute(query)


def wait_for(condition: Callable[[], bool], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.fixture
def notes(database_dsn: str) -> Index:
    run(
        database_dsn,
        "CREATE TABLE notes (id integer PRIMARY KEY, body text)",
        "INSERT INTO notes SELECT i, 'note number ' || i || ' about some topic or other' "
        "FROM generate_series(1, 50) AS i",
    )
    index = create_index(database_dsn, "notes", "notes", "body")
    index.build()
    return index


def _database(dsn: str) -> sql.Identifier:
    return sql.Identifier(str(conninfo_to_dict(dsn)["dbname"]))


def test_sync_reads_committed_rows_under_a_repeatable_read_default(
    database_dsn: str, notes: Index
) -> None:
    """A worker whose transactions default to REPEATABLE READ took an entry with a snapshot
    older than the row's last write and indexed the old text for good."""
    run(database_dsn, "UPDATE notes SET body = 'first version of the note text' WHERE id = 5")
    run(
        database_dsn,
        sql.SQL("ALTER DATABASE {} SET default_transaction_isolation = 'repeatable read'").format(
            _database(database_dsn)
        ),
    )
    dispose_engines()  # pooled connections opened before keep the old default
    # The writer changes row 5 again and, while still in its transaction, holds the queue so
    # the worker (its snapshot taken) waits before taking the entry; then it commits.
    writer = psycopg.connect(database_dsn)
    writer.execute("UPDATE notes SET body = 'second version of the note text' WHERE id = 5")
    writer.execute("LOCK TABLE simindex.notes_queue IN SHARE ROW EXCLUSIVE MODE")
    done = threading.Event()

    def drain() -> None:
        sync(database_dsn, ["notes"])
        done.set()

    worker = threading.Thread(target=drain)
    worker.start()
    try:
        with psycopg.connect(database_dsn, autocommit=True) as watcher:
            wait_for(
                lambda: bool(
                    watcher.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                        "AND datname = current_database()"
                    ).fetchone()
                    == (1,)
                )
            )
    finally:
        writer.commit()
        writer.close()
        worker.join()
    assert done.is_set()
    assert queue_counts(database_dsn, "notes") == (0, 0)
    assert [m.key for m in notes.near("second version of the note text", max_distance=0)] == [5]
    assert check(database_dsn, "notes").ok


def test_sync_on_a_repeatable_read_connection_is_refused(database_dsn: str, notes: Index) -> None:
    run(database_dsn, "UPDATE notes SET body = 'changed for the queue' WHERE id = 5")
    engine = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(database_dsn))
    try:
        with engine.connect() as connection:
            repeatable = connection.execution_options(isolation_level="REPEATABLE READ")
            with pytest.raises(ValueError, match="READ COMMITTED"):
                sync(repeatable, ["notes"])
    finally:
        engine.dispose()
    assert queue_counts(database_dsn, "notes") == (1, 0)


def test_a_statement_timeout_shrinks_the_batch_and_sets_the_row_aside(
    database_dsn: str, notes: Index
) -> None:
    """Under a statement_timeout every batch that waits on key 7's index row was cancelled and
    tried again at the same size, forever: sync shrinks its batches until every other key is
    indexed and key 7 is a failed item naming the cause; a later sync mends it."""
    run(database_dsn, "UPDATE notes SET body = body || ' changed'")
    holder = psycopg.connect(database_dsn)
    holder.execute("SELECT FROM simindex.notes_simhash WHERE key = 7 FOR UPDATE")
    timed = database_dsn + " options='-c statement_timeout=300'"
    try:
        started = time.monotonic()
        report = sync(timed, ["notes"], batch_size=50)
        assert time.monotonic() - started < 30
        assert not report.broken
        assert queue_counts(database_dsn, "notes") == (0, 1)
        ((key, error, _, _),) = failed_items(database_dsn, "notes")
        assert key == 7 and "statement_timeout" in error
    finally:
        holder.rollback()
        holder.close()
    report = sync(timed, ["notes"], retry_failed=True)
    assert report.ok and not report.broken
    assert check(database_dsn, "notes").ok


def test_a_statement_timeout_no_row_escapes_marks_the_index_broken(
    database_dsn: str, notes: Index
) -> None:
    run(database_dsn, "UPDATE notes SET body = body || ' changed'")
    holder = psycopg.connect(database_dsn)
    holder.execute("LOCK TABLE simindex.notes_simhash IN SHARE MODE")
    timed = database_dsn + " options='-c statement_timeout=300'"
    try:
        report = sync(timed, ["notes"], batch_size=50)
        assert set(report.broken) == {"notes"}
        assert "statement_timeout" in report.broken["notes"]
        with psycopg.connect(database_dsn) as conn:
            row = conn.execute(
                "SELECT broken, last_error FROM simindex.indexes WHERE name = 'notes'"
            ).fetchone()
        assert row is not None and row[0] and "statement_timeout" in row[1]
    finally:
        holder.rollback()
        holder.close()
    assert sync(timed, ["notes"], retry_failed=True).ok
    assert check(database_dsn, "notes").ok


def test_a_build_waiting_for_its_swap_never_holds_up_queries(
    database_dsn: str, notes: Index
) -> None:
    """A reader idle in its transaction holds the index's table: the build's swap waits, a
    short lock_timeout at a time, and a query meanwhile does not queue behind it."""
    idle = psycopg.connect(database_dsn)
    idle.execute("SELECT count(*) FROM simindex.notes_simhash")
    built: list[object] = []
    builder = threading.Thread(target=lambda: built.append(notes.build()))
    builder.start()
    try:
        time.sleep(1.5)  # the build has read and is trying to swap
        assert builder.is_alive()
        with psycopg.connect(database_dsn, options="-c statement_timeout=5000") as conn:
            for _ in range(5):
                started = time.monotonic()
                conn.execute("SELECT count(*) FROM simindex.notes_simhash").fetchone()
                assert time.monotonic() - started < 0.5
                time.sleep(0.1)
        assert [m.key for m in notes.near_key(5, max_distance=0)] == []  # answers meanwhile
    finally:
        idle.rollback()
        idle.close()
        builder.join(timeout=30)
    assert len(built) == 1 and check(database_dsn, "notes").ok


def test_a_build_held_off_too_long_gives_up_leaving_the_index_as_it_was(
    database_dsn: str, notes: Index, monkeypatch: pytest.MonkeyPatch
) -> None:
    import simindex.ops.build as build

    monkeypatch.setattr(build, "SWAP_WAIT_SECONDS", 1.0)
    idle = psycopg.connect(database_dsn)
    idle.execute("SELECT count(*) FROM simindex.notes_simhash")
    try:
        with pytest.raises(IndexBusyError, match="idle_in_transaction_session_timeout"):
            notes.build()
    finally:
        idle.rollback()
        idle.close()
    assert notes.stats().rows == 50 and check(database_dsn, "notes").ok
