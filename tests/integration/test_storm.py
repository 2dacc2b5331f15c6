"""A storm: writer processes change the table at random while sync workers follow it; once the
writers stop and the queue drains, the index equals a recomputation and a brute-force answer."""

from __future__ import annotations

import multiprocessing
import time

import psycopg

from simindex import check, sync
from simindex.core.bits import hamming_distance
from simindex.core.spec import IndexSpec, SimHash
from simindex.index import create_index
from simindex.ops.queue import queue_counts
from tests.integration import sync_processes

SPAWN = multiprocessing.get_context("spawn")
KEYS = (1, 600)
WRITE_SECONDS = 4.0


def test_storm_loses_nothing(database_dsn: str) -> None:
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE documents (id integer PRIMARY KEY, body text, note text)")
        conn.execute(
            "INSERT INTO documents SELECT g, 'w1 w2 w3 w' || g, 'n' FROM generate_series(1, 300) g"
        )
    index = create_index(database_dsn, "docs", "documents", "body", method=SimHash(max_distance=3))
    index.build()
    stop_writers, stop_workers = SPAWN.Event(), SPAWN.Event()
    reports = SPAWN.Queue()
    workers = [
        SPAWN.Process(target=sync_processes.worker, args=(database_dsn, stop_workers, 20, reports))
        for _ in range(3)
    ]
    writers = [
        SPAWN.Process(target=sync_processes.writer, args=(database_dsn, seed, stop_writers, KEYS))
        for seed in range(4)
    ]
    try:
        for process in workers + writers:
            process.start()
        time.sleep(WRITE_SECONDS)
        stop_writers.set()
        for process in writers:
            process.join(timeout=30)
            assert process.exitcode == 0
        deadline = time.monotonic() + 30
        while queue_counts(database_dsn, "docs")[0]:
            assert time.monotonic() < deadline, "the queue did not drain"
            time.sleep(0.1)
        stop_workers.set()
        for process in workers:
            process.join(timeout=30)
            assert process.exitcode == 0
        results = [reports.get(timeout=5) for _ in workers]
    finally:
        for process in workers + writers:
            if process.is_alive():
                process.kill()
    taken, batches, reconnects, failed = (sum(column) for column in zip(*results, strict=True))
    assert batches > 3 and taken > 300
    # No error ever reached a worker (a batch the server rolled back to end a deadlock with a
    # writer is taken again on the same connection: _Worker._rolled_back).
    assert (reconnects, failed) == (0, 0)
    assert queue_counts(database_dsn, "docs") == (0, 0)
    # Deletes the workers had not swept yet when they stopped: a one-shot sync sweeps them.
    assert sync(database_dsn).taken == 0

    report = check(database_dsn, "docs")
    assert (report.missing, report.stale, report.orphaned) == ([], [], [])

    # Every query equals brute force over a recomputation of all current rows.
    with psycopg.connect(database_dsn) as conn:
        rows = conn.execute("SELECT id, body FROM documents ORDER BY id").fetchall()
    spec: IndexSpec = index.info().spec
    values, present = spec.simhash_values([text for _, text in rows])
    fingerprints = {
        key: int(value) for (key, _), value, ok in zip(rows, values, present, strict=True) if ok
    }
    for key in list(fingerprints)[::10]:
        expected = sorted(
            (hamming_distance(fingerprints[key], other), other_key)
            for other_key, other in fingerprints.items()
            if other_key != key and hamming_distance(fingerprints[key], other) <= 3
        )
        assert [(m.distance, m.key) for m in index.near_key(key)] == expected
