"""The inbox between the triggers and the keyed queue: the app's writes append to it, a
worker's move (committed before its batch) fills the queue from it. A move waits for a batch
holding the same key, so per key the index rows are written in the order of the source's
versions; it never waits for a writer, and no batch takes an entry a writer holds."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest

from simindex import check, sync
from simindex.index import Index, create_index
from simindex.ops.batch import prepare, write
from simindex.ops.queue import load_target, move, queue_counts, take

FIRST = "the first version of this note, which a slow batch read"
SECOND = "a second version of the note, written while that batch ran"


def run(dsn: str, *statements: str) -> None:
    with psycopg.connect(dsn) as conn:
        for query in statements:
            conn.execute(query)


def inbox(dsn: str) -> list[Any]:
    with psycopg.connect(dsn) as conn:
        return [key for (key,) in conn.execute("SELECT key FROM simindex.notes_inbox")]


@pytest.fixture
def notes(database_dsn: str) -> Index:
    run(
        database_dsn,
        "CREATE TABLE notes (id integer PRIMARY KEY, body text)",
        "INSERT INTO notes SELECT i, 'note number ' || i || ' about some topic or other' "
        "FROM generate_series(1, 20) AS i",
    )
    index = create_index(database_dsn, "notes", "notes", "body")
    index.build()
    return index


def _lock_waits(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as watcher:
        row = watcher.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


def test_the_triggers_append_to_the_inbox_and_a_move_queues_each_key_once(
    database_dsn: str, notes: Index
) -> None:
    run(
        database_dsn,
        "UPDATE notes SET body = body || ' changed' WHERE id IN (3, 4)",
        "UPDATE notes SET body = body || ' again' WHERE id = 3",
    )
    assert sorted(inbox(database_dsn)) == [3, 3, 4]
    assert queue_counts(database_dsn, "notes") == (3, 0)  # the inbox counts as it is
    with psycopg.connect(database_dsn) as worker:
        assert move(worker, "simindex", "notes", 100) == 2
    assert inbox(database_dsn) == []
    assert queue_counts(database_dsn, "notes") == (2, 0)
    assert sync(database_dsn, ["notes"]).taken == 2
    assert check(database_dsn, "notes").ok


def test_an_uncommitted_write_is_not_moved(database_dsn: str, notes: Index) -> None:
    with psycopg.connect(database_dsn) as writer:
        writer.execute("UPDATE notes SET body = %s WHERE id = 5", (SECOND,))
        with psycopg.connect(database_dsn) as worker:
            assert move(worker, "simindex", "notes", 100) == 0  # invisible until the commit
            worker.commit()
            assert sync(database_dsn, ["notes"]).taken == 0
    assert sync(database_dsn, ["notes"]).taken == 1
    assert [m.key for m in notes.near(SECOND, max_distance=0)] == [5]


def test_a_move_waits_for_the_batch_holding_its_key(database_dsn: str, notes: Index) -> None:
    """Worker A took key 5 and read its first version; the app writes a second one and
    commits. Worker B's move of that entry waits for A's batch, so B reads the second version
    after A wrote the first: the index ends with the second. (A move that did not wait would
    either drop the key, or let B write before A, and A's older rows would stay.)"""
    run(database_dsn, f"UPDATE notes SET body = '{FIRST}' WHERE id = 5")
    slow = psycopg.connect(database_dsn)
    try:
        move(slow, "simindex", "notes", 100)
        slow.commit()
        target = load_target(slow, "simindex", "notes")
        assert target is not None
        keys = take(slow, target, 100)
        assert keys == ["5"]
        ready = prepare(slow, target, keys)  # the first version, read
        run(database_dsn, f"UPDATE notes SET body = '{SECOND}' WHERE id = 5")
        with psycopg.connect(database_dsn) as other:
            other.execute("SET lock_timeout = '200ms'")
            with pytest.raises(psycopg.errors.LockNotAvailable):
                move(other, "simindex", "notes", 100)
        reports = []
        worker = threading.Thread(target=lambda: reports.append(sync(database_dsn, ["notes"])))
        worker.start()
        deadline = time.monotonic() + 30
        while _lock_waits(database_dsn) == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert worker.is_alive()  # its move waits for the slow batch
        write(slow, target, ready, len(keys))
        slow.commit()
        worker.join(timeout=60)
        assert not worker.is_alive()
    finally:
        slow.close()
    assert reports[0].taken == 1
    assert [m.key for m in notes.near(SECOND, max_distance=0)] == [5]
    assert notes.near(FIRST, max_distance=0) == []
    assert check(database_dsn, "notes").ok


def test_a_move_never_waits_for_a_writer_and_no_batch_takes_what_it_holds(
    database_dsn: str, notes: Index
) -> None:
    """A writer using a deleted key again (deletes recorded) locks the key's queue entry,
    waiting for a batch holding it. A move meanwhile queues nothing twice and waits for
    nothing; no batch takes the locked entry until the writer commits."""
    run(
        database_dsn,
        "INSERT INTO notes VALUES (700, 'a note soon deleted and written again')",
    )
    with psycopg.connect(database_dsn) as worker:
        move(worker, "simindex", "notes", 100)  # queue: 700
    run(
        database_dsn,
        "UPDATE notes SET body = 'a note changed before its delete' WHERE id = 700",
        "DELETE FROM notes WHERE id = 700",
    )
    assert inbox(database_dsn) == [700]
    with psycopg.connect(database_dsn) as writer:
        writer.execute("INSERT INTO notes VALUES (700, %s)", (SECOND,))
        with psycopg.connect(database_dsn) as other:
            other.execute("SET lock_timeout = '2s'")
            assert move(other, "simindex", "notes", 100) == 0  # 700 is queued already
            other.commit()
            target = load_target(other, "simindex", "notes")
            assert target is not None
            assert take(other, target, 100) == []  # the writer holds it
            other.rollback()
    assert sync(database_dsn, ["notes"]).taken == 1
    assert [m.key for m in notes.near(SECOND, max_distance=0)] == [700]
    assert check(database_dsn, "notes").ok
