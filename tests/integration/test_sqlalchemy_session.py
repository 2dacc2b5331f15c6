"""A tracked ORM session indexes its own writes before its commit and consumes their entries."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, String, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

from simindex import check, sync
from simindex.core.spec import Method, MinHash, SimHash
from simindex.index import Index, create_index
from simindex.ops.queue import queue_counts
from simindex.sqlalchemy import index_changes, is_tracked, track, untrack
from tests.integration import sync_processes

METHODS: dict[str, Method] = {"simhash": SimHash(max_distance=3), "minhash": MinHash(0.7)}
TEXTS = {key: sync_processes.text(random.Random(key)) for key in range(1, 11)}


class Base(DeclarativeBase):
    pass


class Note(Base):
    __tablename__ = "notes"

    id: Mapped[int] = mapped_column(primary_key=True)
    body: Mapped[str | None]
    title: Mapped[str] = mapped_column(String, default="")


@pytest.fixture(params=sorted(METHODS))
def index(request: pytest.FixtureRequest, database_dsn: str, engine: Engine) -> Index:
    Base.metadata.create_all(engine)
    with Session(engine) as session, session.begin():
        session.add_all(Note(id=key, body=text) for key, text in TEXTS.items())
    created = create_index(database_dsn, "notes", "notes", "body", method=METHODS[request.param])
    created.build()
    return created


@pytest.fixture
def tracked(engine: Engine) -> Iterator[sessionmaker[Session]]:
    factory = track(sessionmaker(engine))
    yield factory
    untrack(factory)


def neighbours(index: Index, text: str) -> set[Any]:
    if index.info().spec.kind == "simhash":
        return {match.key for match in index.near(text)}
    return {match.key for match in index.similar(text)}


def neighbours_of_key(index: Index, key: Any) -> set[Any]:
    if index.info().spec.kind == "simhash":
        return {match.key for match in index.near_key(key)}
    return {match.key for match in index.similar(key=key)}


def indexed_keys(dsn: str, index: Index) -> set[Any]:
    table = "notes_simhash" if index.info().spec.kind == "simhash" else "notes_minhash"
    with psycopg.connect(dsn) as conn:
        return {key for (key,) in conn.execute(f"SELECT key FROM simindex.{table}")}


def queued(dsn: str) -> set[Any]:
    with psycopg.connect(dsn) as conn:
        both = "SELECT key FROM simindex.notes_queue UNION SELECT key FROM simindex.notes_inbox"
        return {key for (key,) in conn.execute(both)}


def assert_in_step(dsn: str, index: Index) -> None:
    report = check(dsn, index.name)
    assert (report.missing, report.stale, report.orphaned) == ([], [], [])


def test_insert_is_indexed_before_the_commit_returns(
    database_dsn: str, index: Index, tracked: sessionmaker[Session]
) -> None:
    with tracked() as session:
        session.add(Note(id=101, body=TEXTS[1]))
        session.commit()
    assert neighbours(index, TEXTS[1]) == {1, 101}
    assert neighbours_of_key(index, 101) == {1}
    assert queued(database_dsn) == set()
    assert queue_counts(database_dsn, "notes") == (0, 0)
    assert_in_step(database_dsn, index)


def test_update_is_indexed_before_the_commit_returns(
    database_dsn: str, index: Index, tracked: sessionmaker[Session]
) -> None:
    with tracked.begin() as session:
        note = session.get(Note, 2)
        assert note is not None
        note.body = TEXTS[1]
    assert neighbours_of_key(index, 1) == {2}
    assert neighbours(index, TEXTS[2]) == set()
    assert queued(database_dsn) == set()
    assert_in_step(database_dsn, index)


def test_delete_is_consumed(
    database_dsn: str, index: Index, tracked: sessionmaker[Session]
) -> None:
    with tracked.begin() as session:
        note = session.get(Note, 3)
        assert note is not None
        session.delete(note)
    # Its index rows wait for the worker's sweep; no answer names the deleted row meanwhile.
    assert neighbours(index, TEXTS[3]) == set()
    assert queued(database_dsn) == set()
    sync(database_dsn)
    assert 3 not in indexed_keys(database_dsn, index)
    assert_in_step(database_dsn, index)


def test_null_and_empty_texts_leave_the_index(
    database_dsn: str, index: Index, tracked: sessionmaker[Session]
) -> None:
    with tracked.begin() as session:
        for key, body in ((4, None), (5, ""), (6, "  ...  ")):
            note = session.get(Note, key)
            assert note is not None
            note.body = body
        session.add(Note(id=102, body=None))
    assert indexed_keys(database_dsn, index) == set(TEXTS) - {4, 5, 6}
    assert queued(database_dsn) == set()
    assert_in_step(database_dsn, index)


def test_an_untracked_session_leaves_its_entries_to_the_worker(
    database_dsn: str, index: Index, engine: Engine
) -> None:
    with Session(engine) as session, session.begin():
        session.add(Note(id=103, body=TEXTS[1]))
    assert queued(database_dsn) == {103}
    assert 103 not in indexed_keys(database_dsn, index)
    sync(database_dsn)
    assert neighbours(index, TEXTS[1]) == {1, 103}


def test_a_rollback_leaves_neither_index_rows_nor_entries(
    database_dsn: str, index: Index, tracked: sessionmaker[Session]
) -> None:
    with tracked() as session:
        session.add(Note(id=104, body=TEXTS[1]))
        note = session.get(Note, 7)
        assert note is not None
        session.delete(note)
        session.flush()
        session.rollback()
    assert queued(database_dsn) == set()
    assert indexed_keys(database_dsn, index) == set(TEXTS)
    assert_in_step(database_dsn, index)


def test_entries_of_other_transactions_stay_for_the_worker(
    database_dsn: str, index: Index, tracked: sessionmaker[Session]
) -> None:
    with psycopg.connect(database_dsn) as conn:
        conn.execute("INSERT INTO notes (id, body, title) VALUES (105, %s, '')", (TEXTS[1],))
    with tracked.begin() as session:
        session.add(Note(id=106, body=TEXTS[2]))
    assert queued(database_dsn) == {105}
    assert 106 in indexed_keys(database_dsn, index)


def test_an_entry_queued_earlier_is_taken_when_the_session_writes_its_key(
    database_dsn: str, index: Index, tracked: sessionmaker[Session]
) -> None:
    with psycopg.connect(database_dsn) as conn:
        conn.execute("UPDATE notes SET body = %s WHERE id = 8", (TEXTS[9],))
    assert queued(database_dsn) == {8}
    with tracked.begin() as session:
        note = session.get(Note, 8)
        assert note is not None
        note.body = TEXTS[1]
    assert queued(database_dsn) == set()
    assert neighbours_of_key(index, 1) == {8}
    assert_in_step(database_dsn, index)


def test_writes_inside_a_savepoint_are_indexed(
    database_dsn: str, index: Index, tracked: sessionmaker[Session]
) -> None:
    with tracked.begin() as session:
        with session.begin_nested():
            session.add(Note(id=107, body=TEXTS[1]))
        with session.begin_nested():
            note = session.get(Note, 9)
            assert note is not None
            note.body = TEXTS[1]
        savepoint = session.begin_nested()
        session.add(Note(id=108, body=TEXTS[1]))
        session.flush()
        savepoint.rollback()
    assert neighbours(index, TEXTS[1]) == {1, 9, 107}
    assert queued(database_dsn) == set()
    assert_in_step(database_dsn, index)


def test_other_columns_and_reads_queue_nothing(
    database_dsn: str, index: Index, tracked: sessionmaker[Session]
) -> None:
    with tracked.begin() as session:
        assert len(session.scalars(select(Note)).all()) == len(TEXTS)
        note = session.get(Note, 10)
        assert note is not None
        note.title = "renamed"
    assert queued(database_dsn) == set()
    assert indexed_keys(database_dsn, index) == set(TEXTS)


def test_a_session_class_and_a_session_can_be_tracked(
    database_dsn: str, index: Index, engine: Engine
) -> None:
    class AppSession(Session):
        pass

    track(AppSession)
    try:
        with AppSession(engine) as session, session.begin():
            session.add(Note(id=109, body=TEXTS[1]))
    finally:
        untrack(AppSession)
    plain = track(Session(engine))
    with plain, plain.begin():
        plain.add(Note(id=110, body=TEXTS[1]))
    assert queued(database_dsn) == set()
    assert neighbours(index, TEXTS[1]) == {1, 109, 110}


def test_untrack_removes_the_hook(database_dsn: str, index: Index, engine: Engine) -> None:
    factory = track(sessionmaker(engine))
    assert is_tracked(factory)
    assert track(factory) is factory  # again: no second hook
    with pytest.raises(ValueError, match="untrack it first"):
        track(factory, index_schema="other")
    untrack(factory)
    untrack(factory)
    assert not is_tracked(factory)
    with factory.begin() as session:
        session.add(Note(id=111, body=TEXTS[1]))
    assert queued(database_dsn) == {111}


def test_track_refuses_what_is_not_a_session(engine: Engine) -> None:
    with pytest.raises(TypeError, match="got Engine"):
        track(engine)  # type: ignore[type-var]  # the wrong type is the point
    with pytest.raises(ValueError, match="max_text_bytes"):
        track(sessionmaker(engine), max_text_bytes=-1)


def test_without_simindex_a_tracked_commit_does_nothing_more(engine: Engine) -> None:
    with engine.begin() as connection:
        connection.exec_driver_sql("DROP SCHEMA simindex CASCADE")
    Base.metadata.create_all(engine)
    factory = track(sessionmaker(engine))
    try:
        with factory.begin() as session:
            session.add(Note(id=1, body=TEXTS[1]))
        with factory() as session:
            assert session.get(Note, 1) is not None
    finally:
        untrack(factory)


def test_index_changes_runs_on_a_plain_connection(database_dsn: str, index: Index) -> None:
    with psycopg.connect(database_dsn) as conn:
        assert index_changes(conn) == 0  # nothing written yet
        conn.execute("INSERT INTO notes (id, body, title) VALUES (112, %s, '')", (TEXTS[1],))
        assert index_changes(conn) == 1
    assert queued(database_dsn) == set()
    assert neighbours(index, TEXTS[1]) == {1, 112}


def test_repeatable_read_sessions_are_indexed(
    database_dsn: str, index: Index, engine: Engine
) -> None:
    factory = track(sessionmaker(engine.execution_options(isolation_level="REPEATABLE READ")))
    try:
        with factory.begin() as session:
            assert session.get(Note, 1) is not None  # the snapshot is taken here
            session.add(Note(id=113, body=TEXTS[1]))
    finally:
        untrack(factory)
    assert queued(database_dsn) == set()
    assert neighbours(index, TEXTS[1]) == {1, 113}


def test_an_entry_locked_again_in_a_savepoint_is_taken(
    database_dsn: str, index: Index, tracked: sessionmaker[Session]
) -> None:
    # The entry exists already; the session locks it, then locks it again in a savepoint
    # (PostgreSQL may record both lockers as a MultiXact in xmax).
    with psycopg.connect(database_dsn) as conn:
        conn.execute("UPDATE notes SET body = %s WHERE id = 8", (TEXTS[9],))
    with tracked.begin() as session:
        note = session.get(Note, 8)
        assert note is not None
        note.body = TEXTS[2]
        session.flush()
        with session.begin_nested():
            note.body = TEXTS[1]
    assert queued(database_dsn) == set()
    assert neighbours_of_key(index, 1) == {8}
    assert_in_step(database_dsn, index)
