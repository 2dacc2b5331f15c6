"""Peak memory of the sync worker and of a build on texts of 16 MiB.

    python benchmarks/memory.py [--rows 4 12] [--mib 16] [--local|--embedded] [--output PATH]

Starts a throwaway PostgreSQL, makes a table of ``--rows`` texts of ``--mib`` MiB each
(repetitive, so they take little disk) plus 100 ordinary rows, creates a SimHash index on it
and queues every row; then, each in a fresh process (spawned: it imports only what it needs),
drains the queue with ``sync(dsn, ["big"])`` (default batch size) and rebuilds with
``Index.build(workers=1)``, and reports the process's peak resident memory (``ru_maxrss``) beside
a process that only imported simindex and connected. A batch reads at most
``simindex.ops.batch.BATCH_BYTES`` of text at a time (a longer text alone) and a build batch
at most ``simindex.ops.build.BATCH_BYTES``: the peak should not grow with the number of rows.

Prints a table and writes the figures to ``benchmarks/results/memory.json``. Not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import resource
import time
from pathlib import Path
from typing import Any

import psycopg
from pgserver import add_server_options, benchmark_server
from report import new_result, write_result

RESULTS = Path(__file__).parent / "results" / "memory.json"


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def _baseline(dsn: str, out: Any) -> None:
    import simindex  # noqa: F401

    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT 1")
    out.put(("baseline", _peak_mib(), 0.0, {}))


def _sync(dsn: str, out: Any) -> None:
    from simindex.sync import sync

    started = time.perf_counter()
    report = sync(dsn, ["big"])
    seconds = time.perf_counter() - started
    out.put(("sync", _peak_mib(), seconds, {"indexed": report.indexed, "ok": report.ok}))


def _build(dsn: str, out: Any) -> None:
    from simindex.index import Index

    started = time.perf_counter()
    report = Index(dsn, "big").build(workers=1)
    seconds = time.perf_counter() - started
    out.put(("build", _peak_mib(), seconds, {"rows": report.rows}))


def _in_process(target: Any, dsn: str) -> tuple[str, float, float, dict[str, Any]]:
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    process = context.Process(target=target, args=(dsn, out))
    process.start()
    result = out.get(timeout=3600)
    process.join()
    return result  # type: ignore[no-any-return]


def measure(dsn: str, rows: int, mib: int) -> list[dict[str, Any]]:
    from simindex.db.schema import migrate
    from simindex.errors import IndexNotFoundError
    from simindex.index import create_index, drop_index, get_index

    migrate(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS big")
        conn.execute("CREATE TABLE big (id integer PRIMARY KEY, body text)")
    with contextlib.suppress(IndexNotFoundError):  # from an earlier --rows
        drop_index(dsn, "big")
    create_index(dsn, "big", "big", "body").build()
    repeats = mib * 1024 * 1024 // 32
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO big SELECT i, left(repeat('word ' || i || ' of a long text, ', %s), %s) "
            "FROM generate_series(1, %s) AS i",
            (repeats + 1, mib * 1024 * 1024, rows),
        )
        conn.execute(
            "INSERT INTO big SELECT i, 'an ordinary row ' || i || ' queued behind them' "
            "FROM generate_series(1001, 1100) AS i"
        )
    found = []
    for name, target in (("baseline", _baseline), ("sync", _sync), ("build", _build)):
        kind, peak, seconds, extra = _in_process(target, dsn)
        found.append(
            {
                "run": kind,
                "rows": rows,
                "mib": mib,
                "peak_mib": round(peak, 1),
                "seconds": round(seconds, 1),
                **extra,
            }
        )
        print(
            f"{rows:>5} rows of {mib} MiB  {name:<9} peak {peak:8.1f} MiB  {seconds:6.1f} s  "
            f"{extra}",
            flush=True,
        )
    hits = get_index(dsn, "big").near("an ordinary row 1050 queued behind them", max_distance=0)
    assert [m.key for m in hits] == [1050], hits
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[4, 12])
    parser.add_argument("--mib", type=int, default=16)
    parser.add_argument("--output", type=Path, default=RESULTS)
    add_server_options(parser, default="local")
    args = parser.parse_args()
    result = new_result("memory", None)
    with benchmark_server(args.server, {"fsync": "off"}) as server:
        result["results"] = [
            row for rows in args.rows for row in measure(server.dsn, rows, args.mib)
        ]
        version = server.version
    write_result(args.output, result, version)
    print(f"written to {args.output}")


if __name__ == "__main__":
    main()
