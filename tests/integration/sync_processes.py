"""Entry points of the processes the sync tests start (spawned: importable, and light)."""

from __future__ import annotations

import random
import resource
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

from simindex import stop_on_signals, sync
from simindex.ops.queue import queue_counts
from simindex.ops.sync_connections import StopFlag

WORDS = [f"w{i}" for i in range(400)]


def text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 40)))


def worker(dsn: str, stop: StopFlag, batch_size: int, reports: Any) -> None:
    """A --follow worker until ``stop`` is set, sweeping deleted rows whenever its queue is
    empty (so sweeps race the other workers' batches); puts its report on ``reports``."""
    report = sync(
        dsn, follow=True, stop=stop, batch_size=batch_size, heartbeat=1.0, sweep_delay=0.0
    )
    reports.put((report.taken, report.batches, report.reconnects, report.failed))


def signalled_worker(dsn: str, batch_size: int, connections: int) -> None:
    """A --follow worker that SIGTERM or SIGINT ends, as the command line will run it."""
    with stop_on_signals() as stop:
        report = sync(
            dsn,
            follow=True,
            stop=stop,
            batch_size=batch_size,
            heartbeat=1.0,
            connections=connections,
        )
    print(f"batches={report.batches}", file=sys.stderr)


def memory_capped_sync(dsn: str, headroom: int, reports: Any) -> None:
    """One sync in a process that may map only ``headroom`` more bytes than it has once
    connected (as a worker in a container with a memory limit); puts its report on ``reports``."""
    queue_counts(dsn, "docs")  # everything imported and connected before the cap
    status = Path("/proc/self/status").read_text().splitlines()
    mapped = int(next(line for line in status if line.startswith("VmSize:")).split()[1])
    cap = mapped * 1024 + headroom
    resource.setrlimit(resource.RLIMIT_AS, (cap, resource.getrlimit(resource.RLIMIT_AS)[1]))
    report = sync(dsn, connections=1)
    reports.put((report.taken, report.indexed, report.removed, report.failed))


def writer(
    dsn: str, seed: int, stop: StopFlag, key_range: tuple[int, int], min_commits: int = 100
) -> None:
    """Random small transactions until ``stop`` (but at least ``min_commits``, however late a
    loaded machine starts this process): inserts, updates of the text, of another column and
    of the key, deletes, now and then several in one transaction or a rollback."""
    rng = random.Random(seed)
    low, high = key_range
    commits = 0
    with psycopg.connect(dsn, autocommit=False) as conn:
        while commits < min_commits or not stop.is_set():
            try:
                for _ in range(rng.randint(1, 4)):
                    _one_change(conn, rng, low, high)
            except (psycopg.errors.UniqueViolation, psycopg.errors.DeadlockDetected):
                conn.rollback()  # writers racing each other, as an app's would
                continue
            if rng.random() < 0.05:
                conn.rollback()
            else:
                conn.commit()
                commits += 1
            time.sleep(rng.random() * 0.002)


def _one_change(conn: psycopg.Connection[Any], rng: random.Random, low: int, high: int) -> None:
    key = rng.randrange(low, high)
    action = rng.random()
    if action < 0.35:
        body = None if rng.random() < 0.05 else text(rng)
        conn.execute(
            "INSERT INTO documents (id, body, note) VALUES (%s, %s, 'new') "
            "ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body",
            (key, body),
        )
    elif action < 0.6:
        # A near-duplicate edit: a few words of the current text changed.
        conn.execute(
            "UPDATE documents SET body = regexp_replace(body, 'w' || %s || ' ', 'w' || %s || ' ') "
            "WHERE id = %s",
            (rng.randrange(400), rng.randrange(400), key),
        )
    elif action < 0.75:
        conn.execute("UPDATE documents SET note = note || 'x' WHERE id = %s", (key,))
    elif action < 0.8:
        conn.execute(
            "UPDATE documents SET id = %s WHERE id = %s AND NOT EXISTS "
            "(SELECT FROM documents WHERE id = %s)",
            (key + 1, key, key + 1) if key + 1 < high else (key - 1, key, key - 1),
        )
    elif action < 0.95:
        conn.execute("DELETE FROM documents WHERE id = %s", (key,))
    else:
        conn.execute(
            "DELETE FROM documents WHERE id BETWEEN %s AND %s", (key, min(key + 5, high - 1))
        )
