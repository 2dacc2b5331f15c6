"""Trigger overhead: the app's INSERT, UPDATE of the text and DELETE with and without an index,
as one statement over many rows and as one-row transactions (part 3 of ``benchmarks/sync.py``,
or on its own: ``python benchmarks/sync_overhead.py``).

The bulk statements read their rows from a third table, so that sending them costs nothing;
the queue is drained and the tables vacuumed between measurements (untimed), as a worker and
autovacuum would leave them. Both tables are measured in each round, in turns (the indexed
one first every other round), and one-row transactions in turns of 50 on both tables, so
that a slow second of a shared machine touches both. The ratios are indexed / plain.

``--durable``: the server flushes each commit to disk (``fsync`` and ``full_page_writes`` on,
as PostgreSQL ships), where the benchmark's server by default does not: what the triggers add
to a one-row transaction of an app whose commits are durable, beside the figure without the
flush that the targets are judged on.

``--baseline REF``: a third twin indexed by the triggers of commit REF (its ``simindex`` from
``git archive``, creating the index in a child process), timed in the same turns: the ratios
of both and this checkout's over the baseline's. Beside wall times, the server backend's CPU
time (``/proc/<pid>/schedstat``, a local server only) of each turn: on a loaded machine it
moves less than the wall clock, which also counts waiting for a core.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import corpus
import psycopg
from pgserver import add_server_options
from psycopg import sql
from report import log, new_result, print_table, server_version, write_result

from simindex import sync
from simindex.embedded import apply_settings
from simindex.index import create_index, drop_index
from simindex.ops.sync import DEFAULT_BATCH_SIZE

Conn = psycopg.Connection[tuple[Any, ...]]

STATEMENTS = {
    "insert": "INSERT INTO {table} (id, body) SELECT id, body FROM ovh_texts",
    "update": "UPDATE {table} SET body = body || ' (changed)'",
    "delete": "DELETE FROM {table}",
}
ONE_ROW = {
    "insert": "INSERT INTO {table} (id, body) VALUES (%s, %s)",
    "update": "UPDATE {table} SET body = body || ' (changed)' WHERE id = %s",
    "delete": "DELETE FROM {table} WHERE id = %s",
}
OVERHEAD_TABLES = ("ovh_plain", "ovh_indexed")
BASELINE_TABLE = "ovh_baseline"
BASELINE_INDEX = "ovhb"
# One-row transactions run in turns of this many on each table, so that a slow second of the
# machine touches both.
SINGLES_TURN = 50


def _settle(dsn: str, conn: Conn, names: list[str], tables: Sequence[str]) -> None:
    """Untimed, between measurements: the queues drained, dead rows vacuumed, as a worker and
    autovacuum would leave them."""
    sync(dsn, names, batch_size=DEFAULT_BATCH_SIZE)
    vacuumed = [sql.Identifier(table) for table in tables]
    vacuumed += [
        sql.Identifier("simindex", f"{name}_{kind}")
        for name in names
        for kind in ("inbox", "queue", "deletes", "simhash")
    ]
    for table in vacuumed:
        conn.execute(sql.SQL("VACUUM ANALYZE {}").format(table))


def add_baseline_options(parser: argparse.ArgumentParser) -> None:
    """--baseline and --baseline-note: a third twin indexed by another commit's triggers."""
    parser.add_argument("--baseline", help="git commit whose triggers a third twin gets")
    parser.add_argument("--baseline-note", default="", help="what the baseline commit is")


def short_texts(rows: int) -> list[str]:
    """``rows`` short texts of the corpus, again in turn where it has fewer."""
    return list(itertools.islice(itertools.cycle(corpus.short_texts(min(rows, 145_000))), rows))


def make_tables(conn: Conn, tables: Sequence[str], texts: Sequence[str]) -> None:
    """``tables`` made afresh, empty, and ``ovh_texts`` with ``texts`` (keys from 1), which
    they are filled from."""
    for table in (*tables, "ovh_texts"):
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(sql.Identifier(table)))
        conn.execute(
            sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, body text)").format(
                sql.Identifier(table)
            )
        )
    with conn.cursor().copy("COPY ovh_texts (id, body) FROM STDIN") as copy:
        for key, text in enumerate(texts, start=1):
            copy.write_row((key, text))


def export(ref: str, into: Path) -> str:
    """``simindex/`` of commit ``ref`` under ``into``; returns the commit's id."""
    repository = Path(__file__).resolve().parent.parent
    commit = subprocess.run(
        ["git", "-C", str(repository), "rev-parse", ref], capture_output=True, text=True, check=True
    ).stdout.strip()
    archive = subprocess.run(
        ["git", "-C", str(repository), "archive", commit, "simindex"],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return commit


def _create_baseline_index(dsn: str, tree: Path) -> None:
    """The baseline's index on its twin, created by the baseline's code (its triggers)."""
    code = (
        "import sys\n"
        "from simindex.index import create_index\n"
        f"create_index(sys.argv[1], {BASELINE_INDEX!r}, {BASELINE_TABLE!r}, 'body').build()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tree)}
    subprocess.run([sys.executable, "-c", code, dsn], env=env, cwd=tree, check=True)


class BackendCpu:
    """On-CPU nanoseconds of one connection's server backend so far (Linux, a local server);
    ``None`` where its /proc entry cannot be read."""

    def __init__(self, conn: Conn) -> None:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        self.path = Path(f"/proc/{row[0] if row else 0}/schedstat")

    def __call__(self) -> int | None:
        try:
            return int(self.path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None


def overhead(
    dsn: str, texts: list[str], singles: int, rounds: int, baseline: Path | None = None
) -> dict[str, Any]:
    """The app's INSERT, UPDATE of the text and DELETE, as one statement over ``len(texts)``
    rows (read from a third table, so that sending them costs nothing) and as ``singles``
    one-row transactions, into a table with an index and a twin without (and, with
    ``baseline``, a twin indexed by that tree's code); the queues drained between
    measurements (untimed)."""
    name = "ovh"
    tables = (*OVERHEAD_TABLES, BASELINE_TABLE) if baseline else OVERHEAD_TABLES
    names = [name, BASELINE_INDEX] if baseline else [name]
    bulk: dict[str, dict[str, list[float]]] = {
        kind: {table: [] for table in tables} for kind in STATEMENTS
    }
    single: dict[str, dict[str, list[float]]] = {
        kind: {table: [] for table in tables} for kind in STATEMENTS
    }
    single_cpu: dict[str, dict[str, list[float]]] = {
        kind: {table: [] for table in tables} for kind in STATEMENTS
    }
    count = len(texts)
    with psycopg.connect(dsn, autocommit=True) as conn:
        cpu = BackendCpu(conn)
        make_tables(conn, tables, texts)
        conn.execute("VACUUM ANALYZE ovh_texts")
        create_index(dsn, name, "ovh_indexed", "body").build()
        if baseline:
            _create_baseline_index(dsn, baseline)
        for round_ in range(rounds):
            # Each table first in turn: none always runs on a warmer cache.
            shift = round_ % len(tables)
            order = (*tables[shift:], *tables[:shift])
            for kind in STATEMENTS:
                for table in order:
                    query = sql.SQL(STATEMENTS[kind]).format(table=sql.Identifier(table))
                    started = time.perf_counter()
                    conn.execute(query)
                    bulk[kind][table].append(time.perf_counter() - started)
                _settle(dsn, conn, names, tables)
            for kind in ONE_ROW:
                spent = dict.fromkeys(tables, 0.0)
                spent_cpu: dict[str, float | None] = dict.fromkeys(tables, 0.0)
                for turn in range(0, singles, SINGLES_TURN):
                    for table in order:
                        query = sql.SQL(ONE_ROW[kind]).format(table=sql.Identifier(table))
                        cpu_before = cpu()
                        started = time.perf_counter()
                        for key in range(turn + 1, min(turn + SINGLES_TURN, singles) + 1):
                            params = (key, texts[key % count]) if kind == "insert" else (key,)
                            conn.execute(query, params, prepare=True)
                        spent[table] += time.perf_counter() - started
                        cpu_after = cpu()
                        so_far = spent_cpu[table]
                        spent_cpu[table] = (
                            None
                            if so_far is None or cpu_before is None or cpu_after is None
                            else so_far + (cpu_after - cpu_before) / 1e9
                        )
                for table in tables:
                    single[kind][table].append(spent[table])
                    table_cpu = spent_cpu[table]
                    if table_cpu is not None:
                        single_cpu[kind][table].append(table_cpu)
                _settle(dsn, conn, names, tables)
            log(
                f"overhead round {round_ + 1}: "
                + ", ".join(
                    f"{kind} x{bulk[kind]['ovh_indexed'][-1] / bulk[kind]['ovh_plain'][-1]:.2f}"
                    f"/x{single[kind]['ovh_indexed'][-1] / single[kind]['ovh_plain'][-1]:.2f}"
                    for kind in STATEMENTS
                )
            )
    drop_index(dsn, name)
    if baseline:
        drop_index(dsn, BASELINE_INDEX)
    result: dict[str, Any] = {
        "rounds": rounds,
        "bulk_rows": count,
        "single_transactions": singles,
        "note": "median over rounds; the tables in turns in each round (each first in turn); "
        "queues drained and tables vacuumed between measurements; no LISTENer connected; "
        "single_cpu: the server backend's on-CPU time per one-row transaction",
    }
    for kind in STATEMENTS:
        plain_bulk = statistics.median(bulk[kind]["ovh_plain"])
        idx_bulk = statistics.median(bulk[kind]["ovh_indexed"])
        plain_one = statistics.median(single[kind]["ovh_plain"])
        idx_one = statistics.median(single[kind]["ovh_indexed"])
        result[kind] = {
            "bulk_ms": {"plain": round(1000 * plain_bulk, 1), "indexed": round(1000 * idx_bulk, 1)},
            "bulk_ratio": round(idx_bulk / plain_bulk, 3),
            "bulk_ratios": [
                round(i / p, 3)
                for i, p in zip(bulk[kind]["ovh_indexed"], bulk[kind]["ovh_plain"], strict=True)
            ],
            "single_us": {
                "plain": round(1e6 * plain_one / singles, 1),
                "indexed": round(1e6 * idx_one / singles, 1),
            },
            "single_ratio": round(idx_one / plain_one, 3),
            "single_ratios": [
                round(i / p, 3)
                for i, p in zip(single[kind]["ovh_indexed"], single[kind]["ovh_plain"], strict=True)
            ],
        }
        if all(single_cpu[kind][table] for table in tables):
            plain_cpu = statistics.median(single_cpu[kind]["ovh_plain"])
            idx_cpu = statistics.median(single_cpu[kind]["ovh_indexed"])
            result[kind]["single_cpu_us"] = {
                "plain": round(1e6 * plain_cpu / singles, 1),
                "indexed": round(1e6 * idx_cpu / singles, 1),
            }
            result[kind]["single_cpu_ratio"] = round(idx_cpu / plain_cpu, 3)
        if baseline:
            result[kind]["baseline"] = _baseline_figures(
                bulk[kind], single[kind], single_cpu[kind], singles
            )
    return result


def _baseline_figures(
    bulk: dict[str, list[float]],
    single: dict[str, list[float]],
    single_cpu: dict[str, list[float]],
    singles: int,
) -> dict[str, Any]:
    """The baseline's twin beside plain, and this checkout's over the baseline's, per round
    and as the median (each round's three tables ran in the same turns)."""

    def ratios(times: dict[str, list[float]], over: str, table: str) -> list[float]:
        return [round(t / o, 3) for t, o in zip(times[table], times[over], strict=True)]

    figures: dict[str, Any] = {
        "bulk_ms": round(1000 * statistics.median(bulk[BASELINE_TABLE]), 1),
        "bulk_ratio": round(
            statistics.median(bulk[BASELINE_TABLE]) / statistics.median(bulk["ovh_plain"]), 3
        ),
        "single_us": round(1e6 * statistics.median(single[BASELINE_TABLE]) / singles, 1),
        "single_ratio": round(
            statistics.median(single[BASELINE_TABLE]) / statistics.median(single["ovh_plain"]), 3
        ),
        "bulk_this_over_baseline": ratios(bulk, BASELINE_TABLE, "ovh_indexed"),
        "single_this_over_baseline": ratios(single, BASELINE_TABLE, "ovh_indexed"),
    }
    if single_cpu["ovh_plain"]:
        figures["single_cpu_us"] = round(
            1e6 * statistics.median(single_cpu[BASELINE_TABLE]) / singles, 1
        )
        figures["single_cpu_ratio"] = round(
            statistics.median(single_cpu[BASELINE_TABLE])
            / statistics.median(single_cpu["ovh_plain"]),
            3,
        )
        figures["single_cpu_this_over_baseline"] = ratios(single_cpu, BASELINE_TABLE, "ovh_indexed")
    return figures


def print_overhead(o: dict[str, Any]) -> None:
    """The table of :func:`overhead`'s result (results before the UPDATE and DELETE were
    measured, INSERT only, print nothing here)."""
    if "insert" not in o:
        return
    rows = []
    for kind in STATEMENTS:
        part = o[kind]
        rows.append(
            [
                f"{kind}, {o['bulk_rows']:,} rows in one statement (ms)",
                f"{part['bulk_ms']['plain']:.1f}",
                f"{part['bulk_ms']['indexed']:.1f}",
                f"{part['bulk_ratio']:.2f}",
                " ".join(f"{r:.2f}" for r in part["bulk_ratios"]),
            ]
        )
        rows.append(
            [
                f"{kind}, {o['single_transactions']:,} one-row transactions (us each)",
                f"{part['single_us']['plain']:.0f}",
                f"{part['single_us']['indexed']:.0f}",
                f"{part['single_ratio']:.2f}",
                " ".join(f"{r:.2f}" for r in part["single_ratios"]),
            ]
        )
    for kind in STATEMENTS:
        part = o[kind]
        if "single_cpu_ratio" in part:
            rows.append(
                [
                    f"{kind}, one-row transactions, backend CPU (us each)",
                    f"{part['single_cpu_us']['plain']:.0f}",
                    f"{part['single_cpu_us']['indexed']:.0f}",
                    f"{part['single_cpu_ratio']:.2f}",
                    "",
                ]
            )
        base = part.get("baseline")
        if base:
            rows.append(
                [
                    f"{kind}, baseline's triggers: bulk / one row / one row CPU",
                    "",
                    "",
                    f"{base['bulk_ratio']:.2f} / {base['single_ratio']:.2f} / "
                    f"{base.get('single_cpu_ratio', float('nan')):.2f}",
                    "this/baseline, one row: "
                    + " ".join(f"{r:.2f}" for r in base["single_this_over_baseline"]),
                ]
            )
    print_table(
        "Trigger overhead on the app's writes (median of rounds)",
        ["statement", "plain", "indexed", "ratio", "every round"],
        rows,
    )


TARGETS = {"bulk_ratio": 2.0, "single_ratio": 1.2}
# PostgreSQL's own defaults: every commit flushed to disk before it returns.
DURABLE_SETTINGS = {"fsync": "on", "full_page_writes": "on", "synchronous_commit": "on"}


def targets(o: dict[str, Any]) -> list[list[Any]]:
    out: list[list[Any]] = []
    for kind in STATEMENTS:
        for figure, label in (
            ("bulk_ratio", f"{o['bulk_rows']:,} rows"),
            ("single_ratio", "1 row"),
        ):
            ratio = o[kind][figure]
            limit = TARGETS[figure]
            out.append([f"{kind}, {label}", f"≤ ×{limit}", f"×{ratio:.2f}", ratio <= limit])
    return out


def main(argv: Sequence[str] | None = None) -> None:
    # Here, not at the top: sync.py imports this module.
    from sync import server

    import simindex

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=200_000, help="rows of a bulk statement")
    parser.add_argument("--singles", type=int, default=2000, help="one-row transactions")
    parser.add_argument("--rounds", type=int, default=5)
    add_baseline_options(parser)
    parser.add_argument(
        "--durable", action="store_true", help="fsync and full_page_writes on, as shipped"
    )
    add_server_options(parser)
    parser.add_argument(
        "--output", type=Path, default=Path(__file__).parent / "results/sync-overhead.json"
    )
    args = parser.parse_args(argv)
    report = new_result("sync_overhead", argv)
    report["sizes"] = {"bulk_rows": args.rows, "singles": args.singles, "rounds": args.rounds}
    report["targets_spec"] = TARGETS
    texts = short_texts(args.rows)
    with tempfile.TemporaryDirectory() as scratch, server(args.server) as (dsn, info):
        tree = None
        if args.baseline:
            tree = Path(scratch)
            report["baseline"] = {
                "ref": args.baseline,
                "commit": export(args.baseline, tree),
                "note": args.baseline_note,
            }
        if args.durable:
            apply_settings(dsn, DURABLE_SETTINGS)
            with psycopg.connect(dsn, autocommit=True) as conn:
                for setting in DURABLE_SETTINGS:
                    row = conn.execute("SELECT current_setting(%s)", (setting,)).fetchone()
                    info["settings"][setting] = str(row[0] if row else None)
        report["server"] = info
        log(f"{server_version(info['version'])}; migrating")
        simindex.migrate(dsn)
        report["overhead"] = overhead(dsn, texts, args.singles, args.rounds, tree)
    report["targets"] = targets(report["overhead"])
    write_result(args.output, report, report["server"]["version"])
    print_overhead(report["overhead"])
    print_table(
        "Targets",
        ["figure", "target", "measured", "met"],
        [[row[0], row[1], row[2], "yes" if row[3] else "NO"] for row in report["targets"]],
    )
    print(f"\nwritten: {args.output} ({report['elapsed_seconds']:.0f} s)")


if __name__ == "__main__":
    main()
