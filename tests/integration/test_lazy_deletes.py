"""Deletes off the app's write path: a DELETE records only that it happened, the worker's sweep
removes the index rows of deleted keys, and no answer names a deleted row meanwhile."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import psycopg
import pytest

from simindex import IdenticalGroup, check, sync
from simindex.core.spec import Method, MinHash, SimHash
from simindex.errors import KeyNotIndexedError
from simindex.index import Index, create_index
from simindex.ops.batch import prepare, process, write
from simindex.ops.queue import load_target, move, take
from simindex.ops.stats import index_stats

METHODS: dict[str, Method] = {"simhash": SimHash(max_distance=3), "minhash": MinHash(0.7)}
TEXT = "the quick brown fox jumps over the lazy dog near the river bank today"
OTHER = "an entirely different sentence about accounting ledgers and quarterly reports"


def side_keys(dsn: str, kind: str) -> set[Any]:
    with psycopg.connect(dsn) as conn:
        return {key for (key,) in conn.execute(f"SELECT key FROM simindex.docs_{kind}")}


def by_text(index: Index, kind: str) -> set[Any]:
    """The keys of the rows near TEXT."""
    if kind == "simhash":
        return {m.key for m in index.near(TEXT)}
    return {m.key for m in index.similar(TEXT, verify="estimate")}


def pending_deletes(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM simindex.docs_deletes").fetchone()
    assert row is not None
    return int(row[0])


def answers(dsn: str, index: Index, kind: str, key: int) -> set[Any]:
    """Every key any answer names: Python and SQL, by text and by key, and all pairs."""
    named: set[Any] = set()
    with psycopg.connect(dsn) as conn:
        if kind == "simhash":
            named |= {m.key for m in index.near(TEXT)}
            with contextlib.suppress(KeyNotIndexedError):  # not synced yet
                named |= {m.key for m in index.near_key(key)}
            rows = conn.execute("SELECT key FROM simindex.docs_near_key_v1(%s)", (key,))
            named |= {k for (k,) in rows}
            rows = conn.execute("SELECT left_key, right_key FROM simindex.docs_pairs_v1()")
        else:
            named |= {m.key for m in index.similar(TEXT, verify="estimate")}
            with contextlib.suppress(KeyNotIndexedError):  # not synced yet
                named |= {m.key for m in index.similar(key=key, verify="estimate")}
            rows = conn.execute("SELECT key FROM simindex.docs_similar_key_v1(%s)", (key,))
            named |= {k for (k,) in rows}
            rows = conn.execute("SELECT left_key, right_key FROM simindex.docs_pairs_v1()")
        for left, right in rows:
            named |= {left, right}
    return named


@pytest.fixture
def docs(database_dsn: str) -> str:
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE docs (id integer PRIMARY KEY, body text)")
        for key in range(1, 11):
            conn.execute("INSERT INTO docs VALUES (%s, %s)", (key, TEXT))
        for key in range(11, 21):
            conn.execute("INSERT INTO docs VALUES (%s, %s)", (key, f"{OTHER} {key}"))
    return database_dsn


@pytest.mark.parametrize("kind", METHODS)
def test_a_delete_leaves_index_rows_to_the_sweep_and_no_answer_names_them(
    docs: str, kind: str
) -> None:
    index = create_index(docs, "docs", "docs", "body", method=METHODS[kind])
    index.build()
    with psycopg.connect(docs) as conn:
        conn.execute("DELETE FROM docs WHERE id IN (2, 3, 4)")
    # The app's DELETE left the index rows: the worker removes them.
    assert {2, 3, 4} <= side_keys(docs, kind)
    assert pending_deletes(docs) == 1
    assert check(docs, "docs").orphaned  # until the worker's sweep
    waiting = index_stats(docs, ["docs"])[0]
    assert (waiting.rows, waiting.deletes_waiting) == (20, 1)  # the rows: until the sweep
    named = answers(docs, index, kind, 1)
    assert named & {2, 3, 4} == set()
    assert {5, 6} <= named  # the answers themselves are there
    report = sync(docs, ["docs"])
    assert report.removed == 3
    assert side_keys(docs, kind).isdisjoint({2, 3, 4})
    assert pending_deletes(docs) == 0
    swept = index_stats(docs, ["docs"])[0]
    assert (swept.rows, swept.deletes_waiting) == (17, 0)
    final = check(docs, "docs")
    assert (final.missing, final.stale, final.orphaned) == ([], [], [])


@pytest.mark.parametrize("kind", METHODS)
def test_a_key_deleted_and_inserted_again_keeps_nothing_of_its_deleted_row(
    docs: str, kind: str
) -> None:
    index = create_index(docs, "docs", "docs", "body", method=METHODS[kind])
    index.build()
    with psycopg.connect(docs) as conn:
        conn.execute("DELETE FROM docs WHERE id = 3")
    with psycopg.connect(docs) as conn:
        conn.execute("INSERT INTO docs VALUES (3, %s)", (OTHER + " again",))
    # Its old row's fingerprint is gone before the worker comes: no answer for the deleted
    # text names key 3.
    assert 3 not in side_keys(docs, kind)
    assert 3 not in answers(docs, index, kind, 1)
    sync(docs, ["docs"])
    final = check(docs, "docs")
    assert (final.missing, final.stale, final.orphaned) == ([], [], [])
    assert 3 in side_keys(docs, kind)
    if kind == "simhash":
        assert 3 not in {m.key for m in index.near(TEXT)}
    else:
        assert 3 not in {m.key for m in index.similar(TEXT, verify="estimate")}


@pytest.mark.parametrize("kind", METHODS)
def test_truncate_empties_the_index_at_once(docs: str, kind: str) -> None:
    index = create_index(docs, "docs", "docs", "body", method=METHODS[kind])
    index.build()
    with psycopg.connect(docs) as conn:
        conn.execute("TRUNCATE docs")
    assert side_keys(docs, kind) == set()
    with psycopg.connect(docs) as conn:
        conn.execute("INSERT INTO docs VALUES (1, %s), (2, %s)", (TEXT, TEXT))
    assert answers(docs, index, kind, 1) == set()  # not indexed yet: no answer at all
    sync(docs, ["docs"])
    assert answers(docs, index, kind, 1) == {1, 2}  # by text: 1 itself too
    final = check(docs, "docs")
    assert (final.missing, final.stale, final.orphaned) == ([], [], [])


def test_clusters_and_survivors_never_name_a_deleted_row(docs: str) -> None:
    index = create_index(docs, "docs", "docs", "body", method=METHODS["simhash"])
    index.build()
    index.clusters()
    with psycopg.connect(docs) as conn:
        conn.execute("DELETE FROM docs WHERE id IN (1, 2)")
    members = {m.key for m in index.cluster_members()}
    assert members.isdisjoint({1, 2}) and {3, 4} <= members
    survivors = {s.key for s in index.survivors("pairs")}
    assert survivors.isdisjoint({1, 2})
    assert 1 in side_keys(docs, "simhash")  # not swept yet
    sync(docs, ["docs"])
    final = check(docs, "docs")
    assert (final.missing, final.stale, final.orphaned) == ([], [], [])


def test_a_batch_in_flight_when_a_row_is_deleted_leaves_no_orphan(docs: str) -> None:
    """A batch that read a row before its delete writes its index rows back after: the sweep
    waits for that batch, and removes them."""
    index = create_index(docs, "docs", "docs", "body", method=METHODS["simhash"])
    index.build()
    with psycopg.connect(docs) as conn:
        conn.execute("UPDATE docs SET body = body || ' changed' WHERE id = 5")
    with psycopg.connect(docs) as worker:
        move(worker, "simindex", "docs", 10)  # committed before the batch, as sync does
        worker.commit()
        target = load_target(worker, "simindex", "docs")
        assert target is not None
        keys = take(worker, target, 10)
        assert keys
        # The worker has read row 5 (process reads first), and not committed yet.
        process(worker, target, keys)
        with psycopg.connect(docs, autocommit=True) as app:
            app.execute("DELETE FROM docs WHERE id = 5")
        swept: list[Any] = []

        def sweeper() -> None:
            swept.append(sync(docs, ["docs"]))

        thread = threading.Thread(target=sweeper)
        thread.start()
        thread.join(1.0)
        assert thread.is_alive()  # the sweep waits for the batch in flight
        worker.commit()
    thread.join(30)
    assert not thread.is_alive()
    assert 5 not in side_keys(docs, "simhash")
    final = check(docs, "docs")
    assert (final.missing, final.stale, final.orphaned) == ([], [], [])


def _bulk_keys(index: Index, kind: str, **pairs_arguments: Any) -> set[Any]:
    """Every key Python's bulk answers name: pairs, identical groups, clusters and their
    members and survivors."""
    named: set[Any] = set()
    for pair in index.pairs(**pairs_arguments):
        named |= {pair.left, pair.right}
    for answer in index.pairs(groups=True, **pairs_arguments):
        if isinstance(answer, IdenticalGroup):
            named |= set(answer.keys)
        else:
            named |= {answer.left, answer.right}
    report = index.clusters(**pairs_arguments)
    assert report.rows == 18  # the rows the source holds, not those its deletes left
    for member in index.cluster_members():
        named |= {member.cluster_id, member.key}
    for survivor in index.survivors("pairs"):
        named |= {survivor.cluster_id, survivor.key}
    return named


@pytest.mark.parametrize(
    ("kind", "arguments"),
    [
        ("simhash", {}),
        ("minhash", {"verify": "estimate"}),
        ("minhash", {"verify": "exact"}),
    ],
)
def test_pairs_and_clusters_from_python_never_name_a_deleted_row(
    docs: str, kind: str, arguments: dict[str, Any]
) -> None:
    """A role that sees every index row (here a superuser; the owner and workers too) runs
    pairs and clusters over side tables still holding the deleted rows until the sweep."""
    index = create_index(docs, "docs", "docs", "body", method=METHODS[kind])
    index.build()
    with psycopg.connect(docs) as conn:
        # 1 names its cluster (the smallest key) until deleted; 12 has no near copy.
        conn.execute("DELETE FROM docs WHERE id IN (1, 12)")
    assert {1, 12} <= side_keys(docs, kind)  # not swept yet
    named = _bulk_keys(index, kind, **arguments)
    assert named.isdisjoint({1, 12})
    assert {2, 3} <= named
    sync(docs, ["docs"])
    assert _bulk_keys(index, kind, **arguments) == named


@pytest.mark.parametrize("kind", METHODS)
def test_a_key_changed_to_a_deleted_key_keeps_nothing_of_its_deleted_row(
    docs: str, kind: str
) -> None:
    index = create_index(docs, "docs", "docs", "body", method=METHODS[kind])
    index.build()
    with psycopg.connect(docs) as conn:
        conn.execute("DELETE FROM docs WHERE id = 3")
    with psycopg.connect(docs) as conn:
        conn.execute("UPDATE docs SET id = 3 WHERE id = 15")  # another text, a key used again
    # The deleted row's fingerprint (TEXT's) never answers for the row now keyed 3.
    assert 3 not in side_keys(docs, kind)
    assert 3 not in answers(docs, index, kind, 1)
    sync(docs, ["docs"])
    final = check(docs, "docs")
    assert (final.missing, final.stale, final.orphaned) == ([], [], [])
    assert 3 in side_keys(docs, kind) and 15 not in side_keys(docs, kind)
    assert 3 not in by_text(index, kind)


@pytest.mark.parametrize("kind", METHODS)
@pytest.mark.parametrize("write", ["insert", "update"])
def test_a_repeatable_read_writer_that_cannot_see_the_delete_keeps_nothing_of_the_deleted_row(
    docs: str, kind: str, write: str
) -> None:
    index = create_index(docs, "docs", "docs", "body", method=METHODS[kind])
    index.build()
    with psycopg.connect(docs) as writer:
        writer.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        writer.execute("SELECT count(*) FROM docs")  # its snapshot: before the delete
        with psycopg.connect(docs, autocommit=True) as app:
            app.execute("DELETE FROM docs WHERE id = 3")
        if write == "insert":
            writer.execute("INSERT INTO docs VALUES (3, %s)", (OTHER + " again",))
        else:
            writer.execute("UPDATE docs SET id = 3 WHERE id = 15")
    assert 3 not in side_keys(docs, kind)
    assert 3 not in answers(docs, index, kind, 1)
    sync(docs, ["docs"])
    final = check(docs, "docs")
    assert (final.missing, final.stale, final.orphaned) == ([], [], [])
    assert 3 in side_keys(docs, kind)
    assert 3 not in by_text(index, kind)


def _batch_holding_key_3(dsn: str) -> tuple[psycopg.Connection[Any], Any, Any]:
    """A worker's batch that took key 3 (queued by an update) and read its row, not written
    yet: (its connection, target, what it prepared)."""
    with psycopg.connect(dsn) as conn:
        conn.execute("UPDATE docs SET body = %s WHERE id = 3", (TEXT + " v2",))
    worker = psycopg.connect(dsn)
    move(worker, "simindex", "docs", 10)  # committed before the batch, as sync does
    worker.commit()
    target = load_target(worker, "simindex", "docs")
    assert target is not None
    keys = take(worker, target, 10)
    assert keys == ["3"]  # in their text form
    return worker, target, prepare(worker, target, keys)


@pytest.mark.parametrize("kind", METHODS)
def test_a_batch_that_read_the_deleted_row_never_answers_for_the_key_used_again(
    docs: str, kind: str
) -> None:
    """A batch reads row 3; the app deletes it and inserts key 3 again with another text;
    then the batch writes what it read. The insert waits for the batch (which holds key 3's
    queue entry), then removes what it wrote: no answer names the new row 3 by the old
    row's fingerprint, and the next batch indexes the new row."""
    index = create_index(docs, "docs", "docs", "body", method=METHODS[kind])
    index.build()
    worker, target, ready = _batch_holding_key_3(docs)
    with worker:
        with psycopg.connect(docs, autocommit=True) as app:
            app.execute("DELETE FROM docs WHERE id = 3")
        errors: list[BaseException] = []

        def insert() -> None:
            try:
                with psycopg.connect(docs, autocommit=True) as app:
                    app.execute("INSERT INTO docs VALUES (3, %s)", (OTHER + " again",))
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=insert)
        thread.start()
        thread.join(1.0)
        assert thread.is_alive()  # it waits for the batch holding key 3
        write(worker, target, ready, 1)
        worker.commit()
        thread.join(30)
    assert not thread.is_alive() and errors == []
    assert 3 not in side_keys(docs, kind)
    assert 3 not in answers(docs, index, kind, 1)
    sync(docs, ["docs"])
    final = check(docs, "docs")
    assert (final.missing, final.stale, final.orphaned) == ([], [], [])
    assert 3 in side_keys(docs, kind) and 3 not in by_text(index, kind)


def test_a_repeatable_read_insert_after_a_batch_rewrote_the_deleted_row_fails_to_serialize(
    docs: str,
) -> None:
    """Under REPEATABLE READ the insert's snapshot predates what the batch wrote: its removal
    fails with a serialization failure (the insert never lands, so nothing is answered
    wrong), and the retry removes what the batch wrote."""
    kind = "simhash"
    index = create_index(docs, "docs", "docs", "body", method=METHODS[kind])
    index.build()
    worker, target, ready = _batch_holding_key_3(docs)
    with psycopg.connect(docs) as writer:
        writer.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        writer.execute("SELECT count(*) FROM docs")
        with worker:
            with psycopg.connect(docs, autocommit=True) as app:
                app.execute("DELETE FROM docs WHERE id = 3")
            write(worker, target, ready, 1)
            worker.commit()
        with pytest.raises(psycopg.errors.SerializationFailure):
            writer.execute("INSERT INTO docs VALUES (3, %s)", (OTHER + " again",))
        writer.rollback()
        writer.execute("INSERT INTO docs VALUES (3, %s)", (OTHER + " again",))
    assert 3 not in side_keys(docs, kind)
    assert 3 not in answers(docs, index, kind, 1)
    sync(docs, ["docs"])
    final = check(docs, "docs")
    assert (final.missing, final.stale, final.orphaned) == ([], [], [])


def _following(dsn: str, **options: Any) -> tuple[threading.Thread, threading.Event]:
    stop = threading.Event()
    thread = threading.Thread(
        target=sync, args=(dsn, ["docs"]), kwargs={"follow": True, "stop": stop, **options}
    )
    thread.start()
    return thread, stop


def _wait_for(condition: Any, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_a_following_worker_sweeps_at_most_once_per_sweep_delay(docs: str) -> None:
    """Each sweep is a full anti-join: deletes wait sweep_delay seconds (the oldest one's
    age) while the worker keeps indexing; a sync that does not follow sweeps before it ends."""
    index = create_index(docs, "docs", "docs", "body", method=METHODS["simhash"])
    index.build()
    thread, stop = _following(docs, sweep_delay=3600.0, heartbeat=0.2)
    try:
        with psycopg.connect(docs) as conn:
            conn.execute("DELETE FROM docs WHERE id = 2")
        with psycopg.connect(docs) as conn:
            conn.execute("INSERT INTO docs VALUES (21, %s)", (TEXT,))
        _wait_for(lambda: 21 in side_keys(docs, "simhash"))  # the worker is at work
        time.sleep(1.0)  # passes over an empty queue, a heartbeat each
        assert pending_deletes(docs) == 1 and 2 in side_keys(docs, "simhash")
        assert 2 not in answers(docs, index, "simhash", 1)
    finally:
        stop.set()
        thread.join(30)
    report = sync(docs, ["docs"])
    assert report.removed == 1 and pending_deletes(docs) == 0
    final = check(docs, "docs")
    assert (final.missing, final.stale, final.orphaned) == ([], [], [])


def test_a_following_worker_sweeps_once_the_oldest_delete_is_due(docs: str) -> None:
    """Nothing is written when a delete becomes due: the worker's wait ends then, a heartbeat
    ten minutes away."""
    create_index(docs, "docs", "docs", "body", method=METHODS["simhash"]).build()
    thread, stop = _following(docs, sweep_delay=1.0, heartbeat=600.0)
    try:
        with psycopg.connect(docs) as conn:
            conn.execute("DELETE FROM docs WHERE id IN (2, 3)")
        _wait_for(lambda: pending_deletes(docs) == 0, 20.0)
        assert side_keys(docs, "simhash").isdisjoint({2, 3})
    finally:
        stop.set()
        thread.join(30)
    final = check(docs, "docs")
    assert (final.missing, final.stale, final.orphaned) == ([], [], [])
