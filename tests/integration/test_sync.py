"""Triggers, the queue and the sync worker: every change reaches the index, nothing is lost."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from sqlalchemy import create_engine
from sqlalchemy.pool import QueuePool

from simindex import check, errors, repair, sync
from simindex.core.spec import Method, MinHash, SimHash
from simindex.db.connection import engine_for
from simindex.db.schema import migrate
from simindex.embedded import find_local_bindir, local_postgres, restart_local_postgres
from simindex.index import Index, create_index, drop_index
from simindex.ops.batch import process
from simindex.ops.queue import failed_items, load_target, move, queue_counts, take
from tests.integration import sync_processes

METHODS: dict[str, Method] = {"simhash": SimHash(max_distance=3), "minhash": MinHash(0.7)}


def run(dsn: str, *statements: str) -> None:
    with psycopg.connect(dsn) as conn:
        for query in statements:
            conn.execute(query)


def scalar(dsn: str, query: str) -> Any:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None
    return row[0]


def indexed_keys(dsn: str, index: Index) -> set[Any]:
    table = "docs_simhash" if index.info().spec.kind == "simhash" else "docs_minhash"
    with psycopg.connect(dsn) as conn:
        return {key for (key,) in conn.execute(f"SELECT key FROM simindex.{table}")}


def body(rng: random.Random) -> str:
    return sync_processes.text(rng)


@pytest.fixture
def documents(database_dsn: str) -> str:
    rng = random.Random(3)
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE documents (id integer PRIMARY KEY, body text, note text)")
        with conn.cursor().copy("COPY documents (id, body, note) FROM STDIN") as copy:
            for key in range(1, 101):
                copy.write_row((key, body(rng), "n"))
    return "documents"


@pytest.fixture(params=sorted(METHODS))
def index(request: pytest.FixtureRequest, database_dsn: str, documents: str) -> Index:
    created = create_index(database_dsn, "docs", documents, "body", method=METHODS[request.param])
    created.build()
    return created


def assert_in_step(dsn: str, index: Index) -> None:
    report = check(dsn, index.name)
    assert (report.missing, report.stale, report.orphaned) == ([], [], [])
    assert report.ok


# -- triggers


def test_create_index_installs_triggers_and_drop_removes_them(
    database_dsn: str, documents: str
) -> None:
    create_index(database_dsn, "docs", documents, "body")
    triggers = (
        "SELECT string_agg(tgname, ' ' ORDER BY tgname) FROM pg_trigger WHERE NOT tgisinternal"
    )
    assert scalar(database_dsn, triggers) == (
        "simindex_docs_delete simindex_docs_delete_row simindex_docs_insert "
        "simindex_docs_insert_row simindex_docs_truncate simindex_docs_update "
        "simindex_docs_update_row"
    )
    assert scalar(
        database_dsn,
        "SELECT bool_and(prosecdef AND proconfig @> '{\"search_path=pg_catalog, pg_temp\"}') "
        "FROM pg_proc WHERE proname LIKE 'docs\\_%\\_v1' AND prorettype = 'trigger'::regtype",
    )
    drop_index(database_dsn, "docs")
    assert scalar(database_dsn, triggers) is None
    assert scalar(database_dsn, "SELECT count(*) FROM pg_class WHERE relname LIKE 'docs%'") == 0
    run(database_dsn, "INSERT INTO documents VALUES (500, 'still writable', 'n')")


def test_changes_are_queued_and_sync_applies_them(database_dsn: str, index: Index) -> None:
    assert queue_counts(database_dsn, "docs") == (0, 0)
    rng = random.Random(5)
    run(
        database_dsn,
        f"INSERT INTO documents VALUES (101, '{body(rng)}', 'n'), (102, '{body(rng)}', 'n')",
        f"UPDATE documents SET body = '{body(rng)}' WHERE id = 1",
        "UPDATE documents SET note = 'other column' WHERE id BETWEEN 2 AND 50",
        "UPDATE documents SET body = body WHERE id = 3",  # the same text: nothing to do
        "UPDATE documents SET id = 1000 WHERE id = 4",
    )
    assert queue_counts(database_dsn, "docs") == (5, 0)  # 101, 102, 1, 4 and 1000
    assert {101, 102, 1000}.isdisjoint(indexed_keys(database_dsn, index))

    report = sync(database_dsn)
    assert (report.taken, report.indexed, report.removed, report.failed) == (5, 4, 1, 0)
    assert queue_counts(database_dsn, "docs") == (0, 0)
    keys = indexed_keys(database_dsn, index)
    assert {101, 102, 1000} <= keys and 4 not in keys
    assert_in_step(database_dsn, index)
    assert sync(database_dsn).taken == 0


def test_a_delete_leaves_its_index_rows_to_the_worker(database_dsn: str, index: Index) -> None:
    run(database_dsn, "DELETE FROM documents WHERE id <= 10")
    assert len(indexed_keys(database_dsn, index)) == 100  # the app's DELETE wrote no index row
    report = sync(database_dsn)
    assert (report.taken, report.removed) == (0, 10)  # the sweep: nothing queued
    assert indexed_keys(database_dsn, index).isdisjoint(range(1, 11))
    assert len(indexed_keys(database_dsn, index)) == 90
    assert_in_step(database_dsn, index)


def test_a_delete_never_waits_for_a_worker_that_read_the_row(
    database_dsn: str, index: Index
) -> None:
    run(database_dsn, "UPDATE documents SET body = 'a text changed once more' WHERE id = 5")
    with psycopg.connect(database_dsn) as worker:
        move(worker, "simindex", "docs", 10)  # committed before the batch, as sync does
        worker.commit()
        target = load_target(worker, "simindex", "docs")
        assert target is not None
        assert take(worker, target, 10) == ["5"]  # keys in their text form
        assert process(worker, target, ["5"]).indexed == 1  # the row as it is now
        run(database_dsn, "DELETE FROM documents WHERE id = 5")  # does not wait for it
        worker.commit()
    assert 5 in indexed_keys(database_dsn, index)
    sync(database_dsn)  # the sweep removes what the worker wrote back
    assert 5 not in indexed_keys(database_dsn, index)
    assert_in_step(database_dsn, index)


def test_a_delete_during_a_build_is_removed_after_it(database_dsn: str, index: Index) -> None:
    deleted: list[int] = []

    def delete_once(done: int, total: int | None) -> None:
        if not deleted:  # the build has read its snapshot: the row is in it
            run(database_dsn, "DELETE FROM documents WHERE id = 7")
            deleted.append(7)

    index.build(batch_size=10, progress=delete_once)
    assert 7 in indexed_keys(database_dsn, index)  # from the build's snapshot
    assert queue_counts(database_dsn, "docs") == (0, 0)  # recorded as a delete, no key
    assert sync(database_dsn).removed == 1  # the sweep, after the build
    assert 7 not in indexed_keys(database_dsn, index)
    assert_in_step(database_dsn, index)


def test_truncate_empties_the_index(database_dsn: str, index: Index) -> None:
    run(database_dsn, "INSERT INTO documents VALUES (200, 'pending', 'n')", "TRUNCATE documents")
    assert indexed_keys(database_dsn, index) == set()
    sync(database_dsn)
    assert indexed_keys(database_dsn, index) == set()
    assert_in_step(database_dsn, index)


def test_a_key_changed_many_times_is_processed_once(database_dsn: str, index: Index) -> None:
    for round_ in range(5):
        run(
            database_dsn, f"UPDATE documents SET body = 'version {round_} of the text' WHERE id = 7"
        )
    assert sync(database_dsn).taken == 1
    if index.info().spec.kind == "simhash":
        assert [match.key for match in index.near("version 4 of the text", max_distance=0)] == [7]
    else:
        assert [match.key for match in index.similar("version 4 of the text")] == [7]


def test_the_writers_role_needs_no_rights_on_simindex(database_dsn: str, index: Index) -> None:
    run(
        database_dsn,
        "CREATE ROLE simindex_test_app",
        "GRANT ALL ON documents TO simindex_test_app",
    )
    as_app = "SET ROLE simindex_test_app; "
    try:
        run(database_dsn, as_app + "INSERT INTO documents VALUES (300, 'written by the app', 'n')")
        run(database_dsn, as_app + "UPDATE documents SET body = 'changed by the app' WHERE id = 1")
        run(database_dsn, as_app + "DELETE FROM documents WHERE id = 2")
        assert queued_keys(database_dsn) == {300, 1}
        assert 2 in indexed_keys(database_dsn, index)  # until the worker's sweep
        report = sync(database_dsn)
        assert (report.taken, report.indexed, report.removed, report.failed) == (2, 2, 1, 0)
        assert_in_step(database_dsn, index)
        run(database_dsn, as_app + "TRUNCATE documents")
        assert indexed_keys(database_dsn, index) == set()
        assert_in_step(database_dsn, index)
    finally:
        run(database_dsn, "DROP OWNED BY simindex_test_app; DROP ROLE simindex_test_app")


# -- bad rows


def test_bad_rows_each_have_a_defined_outcome(database_dsn: str, index: Index) -> None:
    run(
        database_dsn,
        "UPDATE documents SET body = NULL WHERE id = 1",
        "UPDATE documents SET body = '' WHERE id = 2",
        "UPDATE documents SET body = E' \\t\\n ' WHERE id = 3",
        "UPDATE documents SET body = '!!! ...' WHERE id = 4",
        # 50 MB: over the default max_text_bytes, so it is never read (test_text_limit.py
        # proves that no block of such a text is fetched).
        "UPDATE documents SET body = repeat('large text ', 5000000) WHERE id = 5",
        "INSERT INTO documents VALUES (6000, 'a new row', 'n')",
    )
    report = sync(database_dsn)
    assert (report.taken, report.indexed, report.removed, report.failed) == (6, 1, 4, 1)
    keys = indexed_keys(database_dsn, index)
    assert keys.isdisjoint({1, 2, 3, 4, 5}) and 6000 in keys
    [(key, error, attempts, _)] = failed_items(database_dsn, "docs")
    assert (key, attempts) == (5, 1)
    assert "55000000 bytes, over max_text_bytes=16777216" in error
    assert queue_counts(database_dsn, "docs") == (0, 1)

    # A retry with the same limit fails again; with a larger one it goes through.
    run(database_dsn, "UPDATE documents SET body = repeat('x y ', 600) WHERE id = 5")
    assert sync(database_dsn, max_text_bytes=1000).failed == 1
    [(_, error, attempts, _)] = failed_items(database_dsn, "docs")
    assert attempts == 2 and "2400 bytes" in error
    assert sync(database_dsn, retry_failed=True, max_text_bytes=None).indexed == 1
    assert failed_items(database_dsn, "docs") == []
    assert_in_step(database_dsn, index)


@pytest.mark.parametrize("column_type", ["varchar(20000)", "character(12)", "citext"])
def test_other_string_types(database_dsn: str, column_type: str) -> None:
    if column_type == "citext":
        run(database_dsn, "CREATE EXTENSION IF NOT EXISTS citext")
    run(
        database_dsn,
        f"CREATE TABLE notes (id bigint PRIMARY KEY, body {column_type})",
        "INSERT INTO notes VALUES (1, 'Hello World'), (2, 'another one')",
    )
    index = create_index(database_dsn, "notes", "notes", "body")
    index.build()
    run(database_dsn, "UPDATE notes SET body = 'HELLO WORLD' WHERE id = 1")
    # Compared as text, so a change of case is queued even where citext calls it equal.
    assert queue_counts(database_dsn, "notes") == (1, 0)
    run(database_dsn, "INSERT INTO notes VALUES (3, 'Hello World')")
    assert sync(database_dsn).indexed == 2
    assert [match.key for match in index.near_key(1)] == [3]
    assert check(database_dsn, "notes").ok


def test_a_failing_row_never_blocks_the_queue(database_dsn: str, index: Index) -> None:
    side = "docs_simhash" if index.info().spec.kind == "simhash" else "docs_minhash"
    # A real failure inside PostgreSQL, for one key only.
    run(
        database_dsn,
        "CREATE FUNCTION refuse_13() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF NEW.key = 13 THEN RAISE EXCEPTION 'key 13 is refused'; END IF; RETURN NEW; END $$",
        f"CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON simindex.{side} "
        "FOR EACH ROW EXECUTE FUNCTION refuse_13()",
        "UPDATE documents SET body = body || ' more' WHERE id BETWEEN 10 AND 20",
    )
    report = sync(database_dsn, batch_size=4)
    assert (report.taken, report.indexed, report.failed) == (11, 10, 1)
    [(key, error, _, _)] = failed_items(database_dsn, "docs")
    assert key == 13 and "RaiseException" in error and "key 13 is refused" in error
    assert queue_counts(database_dsn, "docs") == (0, 1)
    assert check(database_dsn, "docs").stale == [13]

    run(database_dsn, f"DROP TRIGGER refuse ON simindex.{side}")
    assert sync(database_dsn).taken == 0  # failed items wait for a retry
    report = sync(database_dsn, retry_failed=True)
    assert (report.taken, report.indexed, report.failed) == (1, 1, 0)
    assert queue_counts(database_dsn, "docs") == (0, 0)
    assert_in_step(database_dsn, index)


def test_a_text_whose_fingerprint_fails_fails_alone(database_dsn: str, documents: str) -> None:
    index = create_index(database_dsn, "docs", documents, "body")
    index.build()
    # 2.5 million words (7.5 MB, under max_text_bytes): splitting them alone needs more
    # memory than the worker may have; the texts around it in the same batch need little.
    run(
        database_dsn,
        "UPDATE documents SET body = body || ' changed' WHERE id IN (10, 12)",
        "UPDATE documents SET body = repeat('ab ', 2500000) WHERE id = 11",
    )
    reports = SPAWN.Queue()
    process = SPAWN.Process(
        target=sync_processes.memory_capped_sync, args=(database_dsn, 80 * 2**20, reports)
    )
    process.start()
    process.join(timeout=60)
    if process.is_alive():
        process.kill()
    assert process.exitcode == 0
    assert reports.get(timeout=1) == (3, 2, 0, 1)
    [(key, error, attempts, _)] = failed_items(database_dsn, "docs")
    assert (key, attempts) == (11, 1)
    assert error.startswith("fingerprint: ") and "MemoryError" in error
    assert queue_counts(database_dsn, "docs") == (0, 1)

    run(database_dsn, "UPDATE documents SET body = 'a short text again' WHERE id = 11")
    assert sync(database_dsn).indexed == 1
    assert failed_items(database_dsn, "docs") == []
    assert_in_step(database_dsn, index)


# -- workers


def test_workers_share_the_queue_without_doing_anything_twice(
    database_dsn: str, documents: str
) -> None:
    create_index(database_dsn, "docs", documents, "body").build()
    run(
        database_dsn,
        "INSERT INTO documents SELECT g, 'text number ' || g, 'n' "
        "FROM generate_series(101, 3100) AS g",
    )
    start = threading.Barrier(3)
    reports = []

    def work() -> None:
        start.wait()
        reports.append(sync(database_dsn, batch_size=25))

    threads = [threading.Thread(target=work) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sum(report.taken for report in reports) == 3000
    assert all(report.batches > 0 for report in reports)
    assert queue_counts(database_dsn, "docs") == (0, 0)
    assert check(database_dsn, "docs").ok


def test_full_minhash_batches_on_two_connections(database_dsn: str, documents: str) -> None:
    # Default batches of MinHash signatures are megabytes each: the size at which psycopg's
    # pipeline mode can stall with client and server waiting for each other.
    index = create_index(database_dsn, "docs", documents, "body", method=MinHash(0.7))
    index.build()
    rng = random.Random(5)
    with (
        psycopg.connect(database_dsn) as conn,
        conn.cursor().copy("COPY documents (id, body, note) FROM STDIN") as copy,
    ):
        for key in range(101, 4601):
            copy.write_row((key, body(rng), "n"))
    reports = []
    worker = threading.Thread(target=lambda: reports.append(sync(database_dsn, connections=2)))
    worker.start()
    worker.join(timeout=120)
    assert not worker.is_alive(), "sync stalled"
    [report] = reports
    assert (report.taken, report.failed) == (4500, 0)
    assert report.batches >= 3
    assert_in_step(database_dsn, index)


def test_a_following_worker_sees_each_write_within_its_poll_interval(
    database_dsn: str, index: Index
) -> None:
    """No notification wakes the worker: it looks for entries every poll_interval, and a
    heartbeat a minute away plays no part."""
    stop = threading.Event()
    options = {"follow": True, "stop": stop, "heartbeat": 60.0, "poll_interval": 0.1}
    thread = threading.Thread(target=sync, args=(database_dsn,), kwargs=options)
    thread.start()
    try:
        for key in range(1001, 1006):
            run(database_dsn, f"INSERT INTO documents VALUES ({key}, 'a new text {key}', 'n')")
            started = time.monotonic()
            while key not in indexed_keys(database_dsn, index):
                assert time.monotonic() - started < 5, "not seen"
                time.sleep(0.02)
        run(database_dsn, "UPDATE documents SET id = 2001 WHERE id = 1001")
        wait_for(lambda: 2001 in indexed_keys(database_dsn, index), seconds=5)
        assert 1001 not in indexed_keys(database_dsn, index)
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()
    assert_in_step(database_dsn, index)


def test_no_write_sends_a_notification(database_dsn: str, index: Index) -> None:
    """A transaction that notifies takes a lock of the whole cluster at commit and holds it
    while its commit is flushed: the app's writes would commit one at a time. No function of
    simindex's calls pg_notify, and no write of the source, in origin or replica mode, sends
    one on the channel the triggers once used."""
    with psycopg.connect(database_dsn, autocommit=True) as listener:
        listener.execute('LISTEN "simindex_docs"')
        run(
            database_dsn,
            "INSERT INTO documents VALUES (1001, 'one more text', 'n')",
            "UPDATE documents SET body = body || ' changed' WHERE id < 10",
            "DELETE FROM documents WHERE id = 11",
        )
        run(
            database_dsn,
            "SET session_replication_role = replica",
            "INSERT INTO documents VALUES (1002, 'a replicated text', 'n')",
            "UPDATE documents SET body = 'replicated change' WHERE id = 12",
            "DELETE FROM documents WHERE id = 13",
        )
        run(database_dsn, "TRUNCATE documents")
        assert list(listener.notifies(timeout=0.5, stop_after=1)) == []
        notifying = listener.execute(
            "SELECT p.proname FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace "
            "WHERE n.nspname = 'simindex' AND p.prosrc ILIKE '%notify%'"
        ).fetchall()
    assert notifying == []


def test_an_idle_following_worker_looks_and_goes_over_nothing(
    database_dsn: str, index: Index
) -> None:
    """Its looks read the inbox and say there is nothing: no pass reads the catalog meanwhile
    (a look that failed, or said yes, would start a pass each time)."""
    scans = (
        "SELECT coalesce(sum(seq_scan + coalesce(idx_scan, 0)) FILTER (WHERE relname = "
        "'docs_inbox'), 0), coalesce(sum(seq_scan + coalesce(idx_scan, 0)) FILTER (WHERE "
        "relname = 'indexes'), 0) FROM pg_stat_all_tables WHERE schemaname = 'simindex'"
    )
    stop = threading.Event()
    options = {"follow": True, "stop": stop, "heartbeat": 60.0, "poll_interval": 0.05}
    thread = threading.Thread(target=sync, args=(database_dsn,), kwargs=options)
    thread.start()
    try:
        time.sleep(2.0)  # its first pass done, and its statistics reported
        with psycopg.connect(database_dsn) as conn:
            looked, read = conn.execute(scans).fetchone() or (0, 0)
        time.sleep(3.0)
        with psycopg.connect(database_dsn) as conn:
            looked_after, read_after = conn.execute(scans).fetchone() or (0, 0)
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()
    assert looked_after - looked >= 10  # about 60 looks, each reads the inbox
    assert read_after - read <= 2


def test_a_trickle_of_changes_holds_one_connection(database_dsn: str, index: Index) -> None:
    others = (
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    stop = threading.Event()
    options = {"follow": True, "stop": stop, "heartbeat": 60.0, "connections": 2}
    thread = threading.Thread(target=sync, args=(database_dsn,), kwargs=options)
    thread.start()
    try:
        run(database_dsn, "INSERT INTO documents VALUES (1001, 'one more text', 'n')")
        wait_for(lambda: 1001 in indexed_keys(database_dsn, index), seconds=10)
        pool = engine_for(database_dsn).pool
        assert isinstance(pool, QueuePool)
        # Pooled connections of this test's own calls aside; a backend that is still exiting
        # (a loaded machine) is given a moment to go.
        wait_for(lambda: scalar(database_dsn, others) - pool.checkedin() == 1, seconds=5)
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()


def test_sync_in_the_callers_transaction(database_dsn: str, index: Index) -> None:
    run(database_dsn, "INSERT INTO documents VALUES (700, 'in a transaction', 'n')")
    engine = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(database_dsn))
    try:
        with engine.connect() as connection:
            assert sync(connection).indexed == 1
            connection.rollback()
        assert queue_counts(database_dsn, "docs") == (1, 0)
        with engine.connect() as connection:
            sync(connection)
            connection.commit()
        assert queue_counts(database_dsn, "docs") == (0, 0)
        with engine.connect() as connection, pytest.raises(ValueError, match="follow"):
            sync(connection, follow=True)
    finally:
        engine.dispose()


def test_sync_refuses_bad_arguments(database_dsn: str) -> None:
    with pytest.raises(errors.IndexNotFoundError):
        sync(database_dsn, ["nothing"])
    with pytest.raises(ValueError, match="batch_size"):
        sync(database_dsn, batch_size=0)
    for connections in (0, True, 1.5):
        with pytest.raises(ValueError, match="connections"):
            sync(database_dsn, connections=connections)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="index name"):
        sync(database_dsn, ["Bad-Name"])


def wait_for(condition: Callable[[], bool], *, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


# -- crashes, signals, restarts

SPAWN = multiprocessing.get_context("spawn")


def slow_batches(dsn: str, seconds: float) -> None:
    """Every write of the index sleeps: a worker is inside a batch most of the time."""
    run(
        dsn,
        "CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS "
        f"$$ BEGIN PERFORM pg_sleep({seconds}); RETURN NULL; END $$",
        "CREATE TRIGGER slow AFTER INSERT OR UPDATE ON simindex.docs_simhash "
        "FOR EACH STATEMENT EXECUTE FUNCTION slow()",
    )


def sleeping_backend(dsn: str) -> int | None:
    pid = scalar(
        dsn,
        "SELECT min(pid) FROM pg_stat_activity "
        "WHERE wait_event = 'PgSleep' AND datname = current_database()",
    )
    return int(pid) if pid is not None else None


def backend_gone(dsn: str, pid: int) -> bool:
    return not scalar(dsn, f"SELECT count(*) FROM pg_stat_activity WHERE pid = {pid}")


@pytest.fixture
def queued(database_dsn: str, documents: str) -> int:
    """A built SimHash index with 200 more rows queued, batches slowed down."""
    create_index(database_dsn, "docs", documents, "body").build()
    run(
        database_dsn,
        "INSERT INTO documents SELECT g, 'queued text ' || g, 'n' FROM generate_series(101, 300) g",
    )
    slow_batches(database_dsn, 0.3)
    return 200


def queued_keys(dsn: str) -> set[int]:
    with psycopg.connect(dsn) as conn:
        both = "SELECT key FROM simindex.docs_queue UNION SELECT key FROM simindex.docs_inbox"
        return {key for (key,) in conn.execute(both)}


def test_kill_9_mid_batch_loses_nothing(database_dsn: str, queued: int) -> None:
    index = Index(database_dsn, "docs")
    stop = SPAWN.Event()
    reports = SPAWN.Queue()
    process = SPAWN.Process(target=sync_processes.worker, args=(database_dsn, stop, 10, reports))
    process.start()
    try:
        wait_for(lambda: queue_counts(database_dsn, "docs")[0] < queued, seconds=20)
        wait_for(lambda: sleeping_backend(database_dsn) is not None, seconds=5)
        backend = sleeping_backend(database_dsn)
        assert backend is not None
        os.kill(process.pid or 0, signal.SIGKILL)
        process.join(timeout=10)
    finally:
        if process.is_alive():
            process.kill()
    assert process.exitcode == -signal.SIGKILL
    # The server rolls the batch back when it notices its client is gone.
    wait_for(lambda: backend_gone(database_dsn, backend), seconds=10)
    new_keys = set(range(101, 101 + queued))
    done = indexed_keys(database_dsn, index) & new_keys
    waiting = queued_keys(database_dsn)
    assert done and waiting
    assert done | waiting == new_keys and not done & waiting
    run(database_dsn, "DROP TRIGGER slow ON simindex.docs_simhash")
    assert sync(database_dsn).taken == len(waiting)
    assert_in_step(database_dsn, index)


def test_sigterm_finishes_the_batch_and_exits(database_dsn: str, queued: int) -> None:
    # One connection: with two, two batches are in flight when the signal comes.
    process = SPAWN.Process(target=sync_processes.signalled_worker, args=(database_dsn, 10, 1))
    process.start()
    try:
        wait_for(lambda: queue_counts(database_dsn, "docs")[0] < queued, seconds=20)
        wait_for(lambda: sleeping_backend(database_dsn) is not None, seconds=5)
        before = queue_counts(database_dsn, "docs")[0]
        os.kill(process.pid or 0, signal.SIGTERM)
        process.join(timeout=10)
    finally:
        if process.is_alive():
            process.kill()
    assert process.exitcode == 0
    # The batch in flight was committed, and no other started (unless the signal came just as
    # one began: a batch takes 0.3 s, the measurement a few milliseconds).
    assert before - queue_counts(database_dsn, "docs")[0] in (10, 20)


def sleeping_backends(dsn: str) -> int:
    return int(
        scalar(
            dsn,
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE wait_event = 'PgSleep' AND datname = current_database()",
        )
    )


def test_a_backlog_keeps_a_batch_in_flight_on_each_connection(
    database_dsn: str, queued: int
) -> None:
    index = Index(database_dsn, "docs")
    stop = threading.Event()
    options = {"batch_size": 10, "connections": 2, "stop": stop}
    worker = threading.Thread(target=sync, args=(database_dsn,), kwargs=options)
    worker.start()
    try:
        # Each batch's write sleeps 0.3 s inside the server: both connections are seen in one.
        wait_for(lambda: sleeping_backends(database_dsn) == 2, seconds=20)
    finally:
        stop.set()
        worker.join(timeout=20)
    assert not worker.is_alive()
    left = queue_counts(database_dsn, "docs")[0]
    assert 0 < left < queued  # stopped between batches, each of them committed whole
    assert len(indexed_keys(database_dsn, index) & set(range(101, 101 + queued))) == queued - left
    run(database_dsn, "DROP TRIGGER slow ON simindex.docs_simhash")
    assert sync(database_dsn, connections=3, batch_size=7).taken == left
    assert_in_step(database_dsn, index)


def test_a_connection_lost_mid_batch_stops_the_others_after_their_batch(
    database_dsn: str, queued: int
) -> None:
    index = Index(database_dsn, "docs")
    raised: list[BaseException] = []

    def work() -> None:
        try:
            sync(database_dsn, batch_size=10, connections=2)
        except BaseException as exc:
            raised.append(exc)

    worker = threading.Thread(target=work)
    worker.start()
    try:
        wait_for(lambda: sleeping_backends(database_dsn) == 2, seconds=20)
        backend = sleeping_backend(database_dsn)
        run(database_dsn, f"SELECT pg_terminate_backend({backend})")
    finally:
        worker.join(timeout=20)
    assert not worker.is_alive()
    assert len(raised) == 1 and isinstance(raised[0], psycopg.OperationalError)
    left = queue_counts(database_dsn, "docs")[0]
    assert left > queued // 2  # the other connection stopped too, instead of draining alone
    run(database_dsn, "DROP TRIGGER slow ON simindex.docs_simhash")
    assert sync(database_dsn).taken == left
    assert_in_step(database_dsn, index)


@pytest.mark.skipif(find_local_bindir() is None, reason="needs this machine's PostgreSQL binaries")
def test_follow_reconnects_after_a_server_restart() -> None:
    with local_postgres() as dsn:
        migrate(dsn)
        run(dsn, "CREATE TABLE documents (id integer PRIMARY KEY, body text, note text)")
        index = create_index(dsn, "docs", "documents", "body")
        index.build()
        stop = threading.Event()
        reports = []
        thread = threading.Thread(
            target=lambda: reports.append(sync(dsn, follow=True, stop=stop, heartbeat=0.5))
        )
        thread.start()
        try:
            run(dsn, "INSERT INTO documents VALUES (1, 'before the restart', 'n')")
            wait_for(lambda: indexed_keys(dsn, index) == {1}, seconds=5)
            restart_local_postgres(dsn)
            run(dsn, "INSERT INTO documents VALUES (2, 'after the restart', 'n')")
            wait_for(lambda: indexed_keys(dsn, index) == {1, 2}, seconds=15)
        finally:
            stop.set()
            thread.join(timeout=10)
        assert not thread.is_alive()
        assert reports[0].reconnects >= 1
        assert check(dsn, "docs").ok


# -- check and repair


def test_check_finds_and_repair_fixes(database_dsn: str, index: Index) -> None:
    simhash = index.info().spec.kind == "simhash"
    side = "docs_simhash" if simhash else "docs_minhash"
    stored = "fingerprint = fingerprint # 1" if simhash else "sketch = ~sketch"
    run(
        database_dsn,
        # Behind the queue's back: what a bug, a restore or a manual edit could leave (a
        # disabled trigger is no longer one: the index says it needs a rebuild).
        "INSERT INTO documents VALUES (500, 'never indexed', 'n')",
        "DELETE FROM documents WHERE id = 9",
        "UPDATE documents SET body = NULL WHERE id = 8",
        "DELETE FROM simindex.docs_queue",
        "DELETE FROM simindex.docs_inbox",
        f"UPDATE simindex.{side} SET {stored} WHERE key = 7",
    )
    if not simhash:
        run(database_dsn, "UPDATE simindex.docs_minhash SET b0 = b0 + 1 WHERE key = 6")
    report = check(database_dsn, "docs")
    assert report.checked == 100
    assert report.missing == [500]
    assert sorted(report.stale) == ([7] if simhash else [6, 7])
    # 9: deleted, its index rows wait for the worker's sweep.
    assert sorted(report.orphaned) == [8, 9]
    assert not report.ok
    sampled = check(database_dsn, "docs", sample=0.5)
    assert 20 < sampled.checked < 80
    assert set(sampled.stale) <= set(report.stale)

    assert repair(database_dsn, "docs") == report
    assert_in_step(database_dsn, index)
    with pytest.raises(ValueError, match="fraction"):
        check(database_dsn, "docs", sample=0)
