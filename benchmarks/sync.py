"""Sync worker throughput, commit-to-searchable latency and trigger overhead of simindex.

    python benchmarks/sync.py [--quick] [--embedded|--local] [--output PATH]

Starts a throwaway PostgreSQL (embedded by default, ``--local`` for this machine's binaries),
sets a few reloadable settings (``ALTER SYSTEM`` + reload), migrates, and measures:

1. **throughput**: a SimHash index created and built on an empty table, then the rows inserted
   (COPY, 5,000 rows per transaction; the triggers queue them), then the queue drained by 1 or
   2 spawned, warmed-up processes each calling
   ``sync(dsn, [name], batch_size=..., connections=..., follow=False)``, timed from a start
   event to the last one's return; then ``Index.build(workers=1|2)`` on the same rows. The two
   headline runs (1 and 2 processes, default settings) and the builds are repeated in turns and
   the median kept, so that a slow minute of the machine touches both; a few variants (batch
   size, connections per process) run once. Last, the fingerprinting alone in this process.
   The target compares sync and build with one worker process each (the same cores in use:
   the per-core comparison), and sync with two processes against the faster build;
2. **latency**: one ``sync(dsn, follow=True, stop=...)`` process; a writer process inserting one
   row per autocommit transaction at a paced rate; a poller process querying
   ``SELECT key FROM simindex.<name>_simhash WHERE key > <all seen below>`` every
   ``POLL_SLEEP`` s. A key's latency is the start of the first poll that saw it minus the
   moment its INSERT returned (CLOCK_MONOTONIC, shared by the processes): an upper bound, off
   by at most one poll period plus one poll;
3. **trigger overhead**: the app's INSERT, UPDATE of the text and DELETE, as one 200k-row
   statement and as 2,000 one-row transactions, into a table with an index and into a twin
   without (queue drained and tables vacuumed between measurements, untimed).

Prints tables and writes every figure to ``benchmarks/results/sync.json``; ``--print FILE``
prints the tables of a written result again. Not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import multiprocessing
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

import corpus
import psycopg
from pgserver import add_server_options
from psycopg import sql
from report import (
    log,
    median_run,
    new_result,
    print_table,
    read_result,
    server_version,
    summary,
    write_result,
)
from sync_overhead import overhead, print_overhead

import simindex
from simindex import sync
from simindex.core.fingerprints import fingerprint_batch
from simindex.embedded import apply_settings, embedded_postgres, local_postgres
from simindex.index import create_index, drop_index
from simindex.ops.queue import queue_counts
from simindex.ops.sync import DEFAULT_BATCH_SIZE, DEFAULT_CONNECTIONS

Conn = psycopg.Connection[tuple[Any, ...]]
SETTINGS = {"synchronous_commit": "on", "jit": "off", "work_mem": "64MB"}
TARGETS = {"sync_vs_build_per_core": 0.8, "latency_p50_ms": 50.0, "latency_p99_ms": 250.0}
POLL_SLEEP = 0.001
INSERT_CHUNK = 5000
SPAWN = multiprocessing.get_context("spawn")
PARTS = ("throughput", "latency", "overhead")


@contextlib.contextmanager
def server(kind: str) -> Iterator[tuple[str, dict[str, Any]]]:
    with embedded_postgres() if kind == "embedded" else local_postgres() as dsn:
        apply_settings(dsn, SETTINGS)
        time.sleep(0.2)
        with psycopg.connect(dsn, autocommit=True) as conn:
            shown = ("synchronous_commit", "fsync", "full_page_writes", "jit", "shared_buffers")
            info = {
                "kind": kind,
                "version": str(one(conn, "SELECT version()")),
                "settings": {n: str(one(conn, "SELECT current_setting(%s)", (n,))) for n in shown},
            }
        yield dsn, info


def one(conn: Conn, query: Any, params: Any = None) -> Any:
    row = conn.execute(query, params).fetchone()
    return None if row is None else row[0]


def make_table(conn: Conn, table: str) -> None:
    conn.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(sql.Identifier(table)))
    conn.execute(
        sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, body text)").format(sql.Identifier(table))
    )


def copy_rows(conn: Conn, table: str, texts: Sequence[str], first: int = 1) -> float:
    """COPY the texts as ids first.., INSERT_CHUNK rows per transaction; seconds taken."""
    started = time.perf_counter()
    copy = sql.SQL("COPY {} (id, body) FROM STDIN").format(sql.Identifier(table))
    for start in range(0, len(texts), INSERT_CHUNK):
        with conn.transaction(), conn.cursor().copy(copy) as out:
            for offset, text in enumerate(texts[start : start + INSERT_CHUNK]):
                out.write_row((first + start + offset, text))
    return time.perf_counter() - started


# -- 1. throughput


def drain_worker(
    dsn: str,
    name: str,
    spec_json: str,
    run: SyncRun,
    go: Event,
    out: Queue[Any],
) -> None:
    queue_counts(dsn, name)  # warm up: imports, a first connection, a first fingerprint
    fingerprint_batch(spec_json, ["a warm up text of a few words"])
    go.wait()
    started = time.monotonic()
    report = sync(dsn, [name], batch_size=run.batch_size, connections=run.connections, follow=False)
    out.put((started, time.monotonic(), report.taken, report.batches, report.seconds))


@dataclass(frozen=True, slots=True)
class SyncRun:
    """One way of running the workers: processes, batch size, connections per process."""

    workers: int
    batch_size: int = DEFAULT_BATCH_SIZE
    connections: int = DEFAULT_CONNECTIONS

    @property
    def label(self) -> str:
        return f"w={self.workers} b={self.batch_size} c={self.connections}"


def timed_drain(dsn: str, name: str, spec_json: str, run: SyncRun) -> dict[str, Any]:
    go, out = SPAWN.Event(), SPAWN.Queue()
    procs = [
        SPAWN.Process(target=drain_worker, args=(dsn, name, spec_json, run, go, out))
        for _ in range(run.workers)
    ]
    for proc in procs:
        proc.start()
    time.sleep(3.0)  # spawn and import before the clock starts
    began = time.monotonic()
    go.set()
    results = [out.get(timeout=3600) for _ in procs]
    for proc in procs:
        proc.join()
    seconds = max(r[1] for r in results) - began
    taken = sum(r[2] for r in results)
    batches = sum(r[3] for r in results)
    return {
        "rows": taken,
        "batches": batches,
        "seconds": round(seconds, 3),
        "rows_per_s": round(taken / seconds, 1),
        "per_worker_taken": [r[2] for r in results],
    }


def throughput(
    dsn: str, label: str, texts: list[str], runs: list[SyncRun], repeats: int
) -> dict[str, Any]:
    """Sync rates (each run ``repeats`` times, the median kept) beside build rates, measured in
    turns so that a slow minute of the machine touches both."""
    name, table = f"tp_{label}", f"tp_{label}_docs"
    with psycopg.connect(dsn, autocommit=True) as conn:
        make_table(conn, table)
    index = create_index(dsn, name, table, "body")
    index.build()
    spec_json = index.info().spec.to_json()
    measured: dict[SyncRun, list[dict[str, Any]]] = {run: [] for run in runs}
    builds: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    for repeat in range(repeats):
        for run in runs:
            if repeat and run not in runs[:2]:
                continue  # the variants run once; the two headline runs every time
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("TRUNCATE {}").format(sql.Identifier(table)))
                sync(dsn, [name])  # the truncated keys' entries, if any
                copy_rows(conn, table, texts)
                conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(table)))
            queued = queue_counts(dsn, name)[0]
            result = timed_drain(dsn, name, spec_json, run)
            assert result["rows"] == queued == len(texts), (result, queued)
            measured[run].append(result)
            log(f"{label}: sync {run.label}: {result['rows_per_s']:,.0f} rows/s")
        for workers in builds:
            report = index.build(workers=workers)
            builds[workers].append(
                {
                    "rows": report.rows,
                    "seconds": round(report.seconds, 3),
                    "rows_per_s": round(report.rows / report.seconds, 1),
                }
            )
            log(f"{label}: build workers={workers}: {report.rows / report.seconds:,.0f} rows/s")
    started = time.perf_counter()
    for start in range(0, len(texts), DEFAULT_BATCH_SIZE):
        fingerprint_batch(spec_json, list(texts[start : start + DEFAULT_BATCH_SIZE]))
    compute_s = time.perf_counter() - started
    drop_index(dsn, name)
    build = {f"workers_{w}": median_run(results, "rows_per_s") for w, results in builds.items()}
    sync_runs = [{**asdict(run), **median_run(measured[run], "rows_per_s")} for run in runs]
    best_build = max(build.values(), key=lambda b: b["rows_per_s"])["rows_per_s"]
    ratios = {
        # Same processes on the same cores: the per-core comparison.
        "sync_1_worker_vs_build_workers_1": round(
            sync_runs[0]["rows_per_s"] / build["workers_1"]["rows_per_s"], 3
        ),
        # Against the faster build, which need not be the 2-process one: its pool of processes
        # starts at every build.
        "sync_2_workers_vs_best_build": round(sync_runs[1]["rows_per_s"] / best_build, 3),
    }
    return {
        "rows": len(texts),
        "mean_chars": round(sum(map(len, texts)) / len(texts)),
        "repeats": repeats,
        "sync": sync_runs,
        "build": build,
        "fingerprint_only_rows_per_s": round(len(texts) / compute_s, 1),
        **ratios,
        "target": TARGETS["sync_vs_build_per_core"],
    }


# -- 2. latency


def follow_worker(dsn: str, stop: Event, out: Queue[Any]) -> None:
    report = sync(dsn, follow=True, stop=stop, heartbeat=1.0)
    out.put((report.taken, report.batches, report.reconnects))


def writer(dsn: str, table: str, texts: list[str], rate: float, go: Event, out: Queue[Any]) -> None:
    query = sql.SQL("INSERT INTO {} (id, body) VALUES (%s, %s)").format(sql.Identifier(table))
    committed: list[float] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT 1")
        go.wait()
        began = time.monotonic()
        for i, text in enumerate(texts):
            delay = began + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            conn.execute(query, (i + 1, text), prepare=True)
            committed.append(time.monotonic())
    out.put(committed)


def poller(dsn: str, name: str, count: int, done: Event, out: Queue[Any]) -> None:
    side = sql.Identifier("simindex", f"{name}_simhash")
    query = sql.SQL("SELECT key FROM {} WHERE key > %s").format(side)
    seen: dict[int, float] = {}
    low, polls, busy = 0, 0, 0.0
    with psycopg.connect(dsn, autocommit=True) as conn:
        finish = None
        while len(seen) < count:
            start = time.monotonic()
            for (key,) in conn.execute(query, (low,), prepare=True).fetchall():
                seen.setdefault(key, start)
            busy += time.monotonic() - start
            polls += 1
            while low + 1 in seen:
                low += 1
            if done.is_set():
                finish = finish or time.monotonic() + 10
                if time.monotonic() > finish:
                    break
            time.sleep(POLL_SLEEP)
    out.put((seen, polls, busy))


def latency(dsn: str, texts: list[str], rate: float) -> dict[str, Any]:
    name, table = "lat", "lat_docs"
    with psycopg.connect(dsn, autocommit=True) as conn:
        make_table(conn, table)
    create_index(dsn, name, table, "body").build()
    stop, done, go = SPAWN.Event(), SPAWN.Event(), SPAWN.Event()
    follow_out, write_out, poll_out = SPAWN.Queue(), SPAWN.Queue(), SPAWN.Queue()
    follow = SPAWN.Process(target=follow_worker, args=(dsn, stop, follow_out))
    follow.start()
    with psycopg.connect(dsn, autocommit=True) as conn:  # wait until it has connected
        while not one(
            conn,
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
            "AND datname = current_database() AND pid <> pg_backend_pid()",
        ):
            time.sleep(0.05)
    procs = [
        SPAWN.Process(target=writer, args=(dsn, table, texts, rate, go, write_out)),
        SPAWN.Process(target=poller, args=(dsn, name, len(texts), done, poll_out)),
    ]
    for proc in procs:
        proc.start()
    time.sleep(3.0)
    go.set()
    committed: list[float] = write_out.get(timeout=3600)
    done.set()
    seen, polls, busy = poll_out.get(timeout=120)
    stop.set()
    taken, batches, reconnects = follow_out.get(timeout=60)
    for proc in [*procs, follow]:
        proc.join()
    drop_index(dsn, name)
    ms = [1000 * (seen[i + 1] - t) for i, t in enumerate(committed) if i + 1 in seen]
    span = committed[-1] - committed[0]
    stats = summary(ms, ("p50", "p95", "p99", "max", "mean"), digits=2)
    return {
        "rows": len(texts),
        "target_rate_per_s": rate,
        "achieved_rate_per_s": round((len(committed) - 1) / span, 1),
        "seen": len(ms),
        "latency_ms": stats,
        "follow_worker": {
            "taken": taken,
            "batches": batches,
            "rows_per_batch": round(taken / max(batches, 1), 2),
            "reconnects": reconnects,
        },
        "poller": {
            "sleep_s": POLL_SLEEP,
            "polls": polls,
            "mean_poll_ms": round(1000 * busy / max(polls, 1), 3),
            "method": "first poll (start time) whose snapshot holds the key, minus the "
            "monotonic time the writer's autocommit INSERT returned",
        },
        "targets": {"p50_ms": TARGETS["latency_p50_ms"], "p99_ms": TARGETS["latency_p99_ms"]},
    }


# -- report


@dataclass(frozen=True, slots=True)
class Sizes:
    # The short corpus has 145,243 texts; all of them but a round number.
    short_rows: int = 145000
    # The corpus has about 2,800 long documents; each is loaded this many times, under new keys.
    long_copies: int = 3
    repeats: int = 3
    latency_rate: float = 200.0
    latency_seconds: float = 20.0
    overhead_bulk_rows: int = 200_000
    overhead_singles: int = 2000
    overhead_rounds: int = 5

    @classmethod
    def quick(cls) -> Sizes:
        return cls(5000, 1, 1, 200.0, 5.0, 20_000, 200, 1)


# The headline runs (1 and 2 worker processes, defaults) first; then, once each, how the batch
# size and the connections per worker move the rate.
SYNC_RUNS = [
    SyncRun(1),
    SyncRun(2),
    SyncRun(1, batch_size=500, connections=1),
    SyncRun(1, batch_size=DEFAULT_BATCH_SIZE, connections=1),
    SyncRun(1, batch_size=500),
    SyncRun(1, batch_size=5000),
    SyncRun(1, connections=3),
]


def print_report(report: dict[str, Any]) -> None:
    version = server_version(report["server"]["version"])
    rows = []
    for label, part in report.get("throughput", {}).items():
        for run in part["sync"]:
            label_run = SyncRun(run["workers"], run["batch_size"], run["connections"]).label
            rows.append(
                [
                    f"{label} sync {label_run}",
                    f"{run['rows']:,}",
                    f"{run['rows_per_s']:,.0f}",
                    " ".join(f"{rate:,.0f}" for rate in run["all_rows_per_s"]),
                ]
            )
        for key, build in part["build"].items():
            rows.append(
                [
                    f"{label} build {key}",
                    f"{build['rows']:,}",
                    f"{build['rows_per_s']:,.0f}",
                    " ".join(f"{rate:,.0f}" for rate in build["all_rows_per_s"]),
                ]
            )
        rows.append(
            [
                f"{label} fingerprint only",
                f"{part['rows']:,}",
                f"{part['fingerprint_only_rows_per_s']:,.0f}",
                "-",
            ]
        )
    if rows:
        print_table(
            f"Sync throughput ({version}, {report['machine']['cpu_count']} cores; median of runs)",
            ["run", "rows", "rows/s", "every run"],
            rows,
        )
    lat = report.get("latency")
    if lat is not None:
        s = lat["latency_ms"]
        print_table(
            f"Commit-to-searchable, {lat['achieved_rate_per_s']:.0f} writes/s, "
            f"{lat['rows']:,} rows",
            ["p50 ms", "p95 ms", "p99 ms", "max ms", "rows/batch", "poll ms"],
            [
                [
                    f"{s['p50']:.1f}",
                    f"{s['p95']:.1f}",
                    f"{s['p99']:.1f}",
                    f"{s['max']:.1f}",
                    f"{lat['follow_worker']['rows_per_batch']:.2f}",
                    f"{lat['poller']['mean_poll_ms']:.2f}",
                ]
            ],
        )
    if "overhead" in report:
        print_overhead(report["overhead"])
    print_table(
        "Targets",
        ["figure", "target", "measured", "met"],
        [[row[0], row[1], row[2], "yes" if row[3] else "NO"] for row in report["targets"]],
    )


def targets(report: dict[str, Any]) -> list[list[Any]]:
    out: list[list[Any]] = []
    for label, part in report.get("throughput", {}).items():
        for what, key in [
            ("sync 1 worker / build 1 worker", "sync_1_worker_vs_build_workers_1"),
            ("sync 2 workers / faster build", "sync_2_workers_vs_best_build"),
        ]:
            ratio = part[key]
            out.append(
                [
                    f"{label}: {what}",
                    "≥ 0.80",
                    f"{ratio:.2f}",
                    ratio >= TARGETS["sync_vs_build_per_core"],
                ]
            )
    if "latency" in report:
        s = report["latency"]["latency_ms"]
        out.append(["latency p50 ms", "≤ 50", f"{s['p50']:.1f}", s["p50"] <= 50])
        out.append(["latency p99 ms", "≤ 250", f"{s['p99']:.1f}", s["p99"] <= 250])
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small sizes: under a minute")
    add_server_options(parser)
    parser.add_argument("--output", type=Path, default=Path(__file__).parent / "results/sync.json")
    parser.add_argument(
        "--print", dest="print_only", type=Path, help="print the tables of a written JSON and stop"
    )
    parser.add_argument(
        "--parts",
        nargs="+",
        choices=PARTS,
        default=list(PARTS),
        help="what to measure (default: all)",
    )
    args = parser.parse_args(argv)
    if args.print_only:
        print_report(read_result(args.print_only))
        return
    sizes = Sizes.quick() if args.quick else Sizes()
    report = new_result("sync", argv)
    report |= {"sizes": asdict(sizes), "targets_spec": TARGETS}
    short = corpus.short_texts(sizes.short_rows)
    with server(args.server) as (dsn, info):
        report["server"] = info
        log(f"{server_version(info['version'])}; migrating")
        simindex.migrate(dsn)
        if "throughput" in args.parts:
            copies = sizes.long_copies
            long = corpus.long_texts(5000 if copies > 1 else 500) * copies
            report["throughput"] = {
                "short": throughput(
                    dsn, "short", short[: sizes.short_rows], SYNC_RUNS, sizes.repeats
                ),
                "long": throughput(dsn, "long", long, SYNC_RUNS[:2], sizes.repeats),
            }
        if "latency" in args.parts:
            log("latency")
            count = int(sizes.latency_rate * sizes.latency_seconds)
            report["latency"] = latency(dsn, short[:count], sizes.latency_rate)
        if "overhead" in args.parts:
            log("trigger overhead")
            # More rows than the corpus has texts: the texts again, in turn.
            texts = list(itertools.islice(itertools.cycle(short), sizes.overhead_bulk_rows))
            report["overhead"] = overhead(dsn, texts, sizes.overhead_singles, sizes.overhead_rounds)
    report["targets"] = targets(report)
    write_result(args.output, report, report["server"]["version"])
    print_report(report)
    print(f"\nwritten: {args.output} ({report['elapsed_seconds']:.0f} s)")


if __name__ == "__main__":
    main()
