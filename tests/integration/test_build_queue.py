"""A build and the sync queue: keys queued before the build's read are done by the build; a
key changed while it runs stays queued. And what the build reports while it runs."""

from __future__ import annotations

import psycopg
import pytest

from simindex import check, sync
from simindex.index import Index, create_index
from simindex.ops.queue import queue_counts

ROWS = 300


def texts(start: int, stop: int, word: str = "text") -> list[tuple[int, str]]:
    return [(i, f"{word} number {i} with a few more words to shingle") for i in range(start, stop)]


@pytest.fixture
def notes(database_dsn: str) -> str:
    """A table ``notes`` created empty, indexed (created, not built), then filled: the order of
    an Alembic migration followed by a data load. Nothing is ANALYZEd."""
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE notes (id integer PRIMARY KEY, body text)")
    create_index(database_dsn, "notes", "notes", "body")
    with psycopg.connect(database_dsn) as conn:
        conn.cursor().executemany("INSERT INTO notes VALUES (%s, %s)", texts(1, ROWS + 1))
    return database_dsn


def test_build_takes_the_keys_queued_before_it_off_the_queue(notes: str) -> None:
    assert queue_counts(notes, "notes") == (ROWS, 0)
    report = Index(notes, "notes").build()
    assert (report.rows, report.dequeued) == (ROWS, ROWS)
    assert queue_counts(notes, "notes") == (0, 0)


def test_a_row_changed_during_the_build_stays_queued(notes: str) -> None:
    index = Index(notes, "notes")
    holder = psycopg.connect(notes)
    changed: list[int] = []

    def during(done: int, total: int | None) -> None:
        if changed:
            return
        # After the build's snapshot: a committed change of row 5, a new row 1000, and row 7
        # changed by a writer still in its transaction when the build ends.
        with psycopg.connect(notes) as writer:
            writer.execute("UPDATE notes SET body = 'changed while building' WHERE id = 5")
            writer.execute("INSERT INTO notes VALUES (1000, 'inserted while building')")
        holder.execute("UPDATE notes SET body = 'still being changed' WHERE id = 7")
        changed.append(done)

    try:
        report = index.build(batch_size=50, workers=1, progress=during)
        assert changed
        # Row 7's entry from before the build went with the version the build read; the
        # writer's own entry (in the inbox, invisible until it commits) stays.
        assert report.dequeued == ROWS - 1
        holder.commit()
        with psycopg.connect(notes) as conn:
            both = "SELECT key FROM simindex.notes_queue UNION SELECT key FROM simindex.notes_inbox"
            queued = {key for (key,) in conn.execute(both)}
        assert queued == {5, 7, 1000}
    finally:
        holder.rollback()
        holder.close()
    sync(notes)
    assert [m.key for m in index.near("changed while building", max_distance=0)] == [5]
    assert [m.key for m in index.near("still being changed", max_distance=0)] == [7]
    assert [m.key for m in index.near("inserted while building", max_distance=0)] == [1000]


def test_progress_has_a_total_before_the_table_was_analyzed(notes: str) -> None:
    with psycopg.connect(notes) as conn:
        reltuples = conn.execute("SELECT reltuples FROM pg_class WHERE relname = 'notes'")
        assert reltuples.fetchone() == (-1.0,)  # never analyzed
    seen: list[tuple[int, int | None]] = []
    Index(notes, "notes").build(
        batch_size=100, progress=lambda done, total: seen.append((done, total))
    )
    assert [done for done, _ in seen] == [100, 200, 300]
    assert all(total is not None and total > 0 for _, total in seen)


@pytest.mark.parametrize("savepoints", [0, 1, 3])
def test_a_row_written_in_a_savepoint_committed_during_the_build_stays_queued(
    notes: str, savepoints: int
) -> None:
    """A writer in its transaction when the build's snapshot is taken commits while the build
    reads: the build read the row as it was before, so its entry must stay queued, however
    deep in subtransactions the row was written (their xids are not in a snapshot's list)."""
    index = Index(notes, "notes")
    holder = psycopg.connect(notes)
    for depth in range(savepoints):
        holder.execute(f"SAVEPOINT s{depth}")
    holder.execute("UPDATE notes SET body = 'written in a savepoint' WHERE id = 5")
    with psycopg.connect(notes) as other:  # a later transaction ends: the snapshot's xmax
        other.execute("CREATE TABLE elsewhere (id integer)")  # passes the savepoint's xid
    committed: list[int] = []

    def during(done: int, total: int | None) -> None:
        if not committed:
            holder.commit()
            committed.append(done)

    try:
        report = index.build(batch_size=50, workers=1, progress=during)
        assert committed
    finally:
        holder.close()
    with psycopg.connect(notes) as conn:
        both = "SELECT key FROM simindex.notes_queue UNION SELECT key FROM simindex.notes_inbox"
        queued = {key for (key,) in conn.execute(both)}
    assert queued == {5}
    assert report.dequeued == ROWS - 1
    sync(notes)
    assert [m.key for m in index.near("written in a savepoint", max_distance=0)] == [5]
    assert check(notes, "notes").ok


def test_long_texts_are_read_alone_even_when_their_rows_change_during_the_build(
    database_dsn: str,
) -> None:
    """A text over the cursor's inline limit is read by itself, by its row version's ctid; a
    row changed meanwhile (text or not) or deleted comes out right after sync."""
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE papers (id integer PRIMARY KEY, n integer, body text)")
        conn.execute(
            "INSERT INTO papers SELECT i, 0, 'a short paper number ' || i || ' on a topic' "
            "FROM generate_series(1, 6) AS i"
        )
        conn.execute(
            "INSERT INTO papers SELECT i, 0, repeat('long paper ' || i || ' words go on ', 1500) "
            "FROM generate_series(10, 14) AS i"
        )
    index = create_index(database_dsn, "papers", "papers", "body")
    changed: list[int] = []

    def during(done: int, total: int | None) -> None:
        if changed:
            return
        with psycopg.connect(database_dsn) as writer:
            writer.execute("UPDATE papers SET n = 1 WHERE id = 10")  # text unchanged: unqueued
            writer.execute("UPDATE papers SET body = 'now a short paper' WHERE id = 11")
            writer.execute("DELETE FROM papers WHERE id = 12")
            writer.execute("UPDATE papers SET body = body || ' and one more' WHERE id = 13")
        changed.append(done)

    report = index.build(batch_size=2, workers=1, progress=during)
    assert changed and report.rows == 10  # 6 short, 4 long (as read), 1 deleted before
    sync(database_dsn)
    assert check(database_dsn, "papers").ok
    assert [m.key for m in index.near("now a short paper", max_distance=0)] == [11]
