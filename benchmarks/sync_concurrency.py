"""Concurrent writers: the app's one-row INSERT, UPDATE of the text and DELETE, each its own
transaction, from several clients at once (pgbench), into a table without an index and into a
twin with one (``python benchmarks/sync_concurrency.py``).

What it is for: a transaction that has called ``pg_notify()`` takes one lock for the whole
cluster at commit and holds it until its commit record is flushed, so while the triggers
notify, concurrent writers to indexed tables commit one after the other and no longer share
their flushes (group commit). One client does not show it, sixteen do; so the server flushes
each commit to disk (``fsync``, ``full_page_writes`` and ``synchronous_commit`` on, as
PostgreSQL ships) unless ``--no-durable``.

Each twin starts with ``--rows`` rows. An UPDATE changes a random one of them; a DELETE takes
its id from a sequence, so no two clients delete the same row, and the deleted rows are put
back after the run; the rows an INSERT run added are deleted after it. Then, untimed, the
queues are drained and the tables vacuumed, as a worker and autovacuum would leave them: no
worker runs during the timed runs, unless ``--worker`` (``sync(follow=True)`` in a thread).
The tables run in turns for each operation and number of clients (a different one first each
round), each run ``--seconds`` long; the figures are the medians over ``--rounds``, and the
ratios are throughputs: plain / indexed and baseline / indexed, how many times faster.

``--baseline REF``: a third twin indexed by the triggers of commit REF (as in
``sync_overhead.py``), timed in the same turns.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import statistics
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, LiteralString

import psycopg
from pgserver import add_server_options, benchmark_server
from psycopg import sql
from report import log, new_result, print_table, server_version, write_result
from sync_overhead import (
    BASELINE_INDEX,
    BASELINE_TABLE,
    DURABLE_SETTINGS,
    _create_baseline_index,
    _settle,
    add_baseline_options,
    export,
    make_tables,
    short_texts,
)

import simindex
from simindex import sync
from simindex.embedded import embedded_bindir, find_local_bindir
from simindex.index import create_index, drop_index

Conn = psycopg.Connection[tuple[Any, ...]]
TABLES = {"plain": "ovh_plain", "indexed": "ovh_indexed", "baseline": BASELINE_TABLE}
INDEX = "ovh"
# pgbench scripts; :rows is the twins' starting size. The DELETE's id comes from a sub-select,
# evaluated once: nextval() in the WHERE clause itself would be called for every row scanned.
SCRIPTS: dict[str, LiteralString] = {
    "insert": "\\set text random(1, :rows)\n"
    "INSERT INTO {table} (id, body)"
    " SELECT nextval('ovh_new_ids'), body FROM ovh_texts WHERE id = :text;\n",
    "update": "\\set id random(1, :rows)\n"
    "UPDATE {table} SET body = body || ' (changed)' WHERE id = :id;\n",
    "delete": "DELETE FROM {table} WHERE id = (SELECT nextval('ovh_deleted_ids'));\n",
}
SETTINGS = {"jit": "off"}
# Room for the sync worker's and this script's connections beside the clients.
SPARE_CONNECTIONS = 20


def find_pgbench(kind: str) -> Path:
    """pgbench from the same binaries as the server."""
    bindir = embedded_bindir() if kind == "embedded" else find_local_bindir()
    pgbench = bindir / "pgbench" if bindir else None
    if pgbench is None or not os.access(pgbench, os.X_OK):
        raise SystemExit(f"no pgbench beside the {kind} PostgreSQL binaries ({bindir})")
    return pgbench


def pgbench(
    program: Path, dsn: str, script: Path, clients: int, seconds: int, rows: int
) -> dict[str, float]:
    """One timed run: its transactions per second and mean latency."""
    threads = min(clients, os.cpu_count() or 1)
    command = [
        *(str(program), "--no-vacuum", "--protocol=prepared", f"--time={seconds}"),
        *(f"--client={clients}", f"--jobs={threads}", f"--define=rows={rows}"),
        *(f"--file={script}", dsn),
    ]
    out = subprocess.run(command, capture_output=True, text=True, check=False)
    tps = re.search(r"^tps = ([\d.]+)", out.stdout, re.MULTILINE)
    latency = re.search(r"^latency average = ([\d.]+) ms", out.stdout, re.MULTILINE)
    failed = re.search(r"^number of failed transactions: (\d+)", out.stdout, re.MULTILINE)
    if out.returncode != 0 or not tps or not latency or (failed and failed[1] != "0"):
        raise RuntimeError(f"pgbench failed: {out.stdout}{out.stderr}")
    return {"tps": float(tps[1]), "latency_ms": float(latency[1])}


def make_twins(conn: Conn, dsn: str, texts: Sequence[str], baseline: Path | None) -> None:
    """The texts table and the twins, each filled with every text; the indexes built."""
    make_tables(conn, list(TABLES.values()), texts)
    for table in TABLES.values():
        conn.execute(
            sql.SQL("INSERT INTO {} SELECT id, body FROM ovh_texts").format(sql.Identifier(table))
        )
    conn.execute("DROP SEQUENCE IF EXISTS ovh_new_ids, ovh_deleted_ids")
    conn.execute(
        sql.SQL("CREATE SEQUENCE ovh_new_ids START {}").format(sql.Literal(len(texts) + 1))
    )
    conn.execute("CREATE SEQUENCE ovh_deleted_ids")
    create_index(dsn, INDEX, TABLES["indexed"], "body").build()
    if baseline:
        _create_baseline_index(dsn, baseline)


def put_back(conn: Conn, kind: str, table: str, rows: int) -> None:
    """Untimed, after a run: the twin at its starting size again."""
    name = sql.Identifier(table)
    if kind == "insert":
        conn.execute(sql.SQL("DELETE FROM {} WHERE id > %s").format(name), (rows,))
    elif kind == "delete":
        row = conn.execute("SELECT last_value FROM ovh_deleted_ids").fetchone()
        deleted = int(row[0]) if row else 0
        if deleted > rows:
            raise SystemExit(f"a DELETE run used {deleted:,} ids of {rows:,} rows: raise --rows")
        conn.execute(
            sql.SQL("INSERT INTO {} SELECT id, body FROM ovh_texts WHERE id <= %s").format(name),
            (deleted,),
        )
        conn.execute("ALTER SEQUENCE ovh_deleted_ids RESTART")


@contextmanager
def worker(dsn: str, names: list[str], running: bool) -> Iterator[None]:
    """With ``running``, a sync worker following the queues in a thread for the block."""
    if not running:
        yield
        return
    stop = threading.Event()
    failed: list[Exception] = []

    def follow() -> None:
        try:
            sync(dsn, names, follow=True, stop=stop)
        except Exception as exc:  # re-raised below: a run without its worker is no result
            failed.append(exc)

    thread = threading.Thread(target=follow)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
    if failed:
        raise RuntimeError("the sync worker failed during a run") from failed[0]


def concurrency(
    dsn: str,
    pgbench_program: Path,
    args: argparse.Namespace,
    texts: Sequence[str],
    baseline: Path | None,
) -> dict[str, Any]:
    """Every operation, number of clients and twin, ``args.rounds`` times; the medians."""
    labels = list(TABLES) if baseline else ["plain", "indexed"]
    tables = [TABLES[label] for label in labels]
    names = [INDEX, BASELINE_INDEX] if baseline else [INDEX]
    runs: dict[tuple[str, int, str], list[dict[str, float]]] = {
        key: [] for key in itertools.product(SCRIPTS, args.clients, labels)
    }
    with tempfile.TemporaryDirectory() as scratch, psycopg.connect(dsn, autocommit=True) as conn:
        make_twins(conn, dsn, texts, baseline)
        scripts = {}
        for (kind, text), label in itertools.product(SCRIPTS.items(), labels):
            scripts[kind, label] = Path(scratch) / f"{kind}-{label}.sql"
            query = sql.SQL(text).format(table=sql.Identifier(TABLES[label]))
            scripts[kind, label].write_text(query.as_string(conn))
        _settle(dsn, conn, names, tables)
        for round_ in range(args.rounds):
            shift = round_ % len(labels)
            order = [*labels[shift:], *labels[:shift]]
            for clients, kind in itertools.product(args.clients, SCRIPTS):
                for label in order:
                    with worker(dsn, names, args.worker):
                        run = pgbench(
                            pgbench_program,
                            dsn,
                            scripts[kind, label],
                            clients,
                            args.seconds,
                            args.rows,
                        )
                    runs[kind, clients, label].append(run)
                    put_back(conn, kind, TABLES[label], args.rows)
                    _settle(dsn, conn, names, tables)
                log(
                    f"round {round_ + 1}, {kind}, {clients} clients: "
                    + ", ".join(
                        f"{label} {runs[kind, clients, label][-1]['tps']:,.0f}" for label in labels
                    )
                    + " tps"
                )
    drop_index(dsn, INDEX)
    if baseline:
        drop_index(dsn, BASELINE_INDEX)
    return {
        "rows": args.rows,
        "seconds": args.seconds,
        "rounds": args.rounds,
        "durable": args.durable,
        "worker": args.worker,
        "note": "median over rounds of pgbench runs; tps: transactions per second; "
        "over_indexed: a twin's tps / the indexed twin's, per round and of the medians",
        "runs": [
            figures(kind, clients, {label: runs[kind, clients, label] for label in labels})
            for kind, clients in itertools.product(SCRIPTS, args.clients)
        ],
    }


def figures(kind: str, clients: int, runs: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    """One operation and number of clients: each twin's median tps and latency, and the other
    twins' throughput over the indexed one's."""
    tps = {label: [round(run["tps"], 1) for run in found] for label, found in runs.items()}
    median = {label: statistics.median(values) for label, values in tps.items()}
    return {
        "operation": kind,
        "clients": clients,
        "tps": {label: round(value, 1) for label, value in median.items()},
        "latency_ms": {
            label: round(statistics.median(run["latency_ms"] for run in found), 3)
            for label, found in runs.items()
        },
        "over_indexed": {
            label: round(median[label] / median["indexed"], 3)
            for label in runs
            if label != "indexed"
        },
        "over_indexed_per_round": {
            label: [round(t / i, 3) for t, i in zip(tps[label], tps["indexed"], strict=True)]
            for label in runs
            if label != "indexed"
        },
        "tps_per_round": tps,
    }


def print_concurrency(result: dict[str, Any]) -> None:
    labels = list(result["runs"][0]["tps"])
    others = [label for label in labels if label != "indexed"]
    rows = [
        [
            run["operation"],
            run["clients"],
            *(f"{run['tps'][label]:,.0f}" for label in labels),
            *(f"{run['latency_ms'][label]:.2f}" for label in labels),
            *(f"{run['over_indexed'][label]:.2f}" for label in others),
        ]
        for run in result["runs"]
    ]
    print_table(
        f"Concurrent one-row transactions (median of {result['rounds']} rounds"
        f" of {result['seconds']} s{', worker running' if result['worker'] else ''})",
        [
            "operation",
            "clients",
            *(f"tps {label}" for label in labels),
            *(f"ms {label}" for label in labels),
            *(f"{label}/indexed" for label in others),
        ],
        rows,
        "l" + "r" * (1 + 2 * len(labels) + len(others)),
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--clients",
        type=lambda text: [int(part) for part in text.split(",")],
        default=[1, 4, 16, 32],
        help="numbers of concurrent clients, comma-separated (default 1,4,16,32)",
    )
    parser.add_argument("--seconds", type=int, default=8, help="length of each pgbench run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rows", type=int, default=100_000, help="rows in each twin")
    add_baseline_options(parser)
    parser.add_argument(
        "--durable",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="fsync, full_page_writes and synchronous_commit on, as shipped (default on)",
    )
    parser.add_argument(
        "--worker", action="store_true", help="a sync(follow=True) worker runs during the runs"
    )
    add_server_options(parser)
    parser.add_argument(
        "--output", type=Path, default=Path(__file__).parent / "results/sync-concurrency.json"
    )
    args = parser.parse_args(argv)
    texts = short_texts(args.rows)
    report = new_result("sync_concurrency", argv)
    settings = {
        **SETTINGS,
        **(DURABLE_SETTINGS if args.durable else {}),
        "max_connections": str(max(100, max(args.clients) + SPARE_CONNECTIONS)),
    }
    program = find_pgbench(args.server)
    with (
        tempfile.TemporaryDirectory() as scratch,
        benchmark_server(args.server, settings) as server,
    ):
        tree = None
        if args.baseline:
            tree = Path(scratch)
            report["baseline"] = {
                "ref": args.baseline,
                "commit": export(args.baseline, tree),
                "note": args.baseline_note,
            }
        report["server"] = {
            "kind": server.kind,
            "version": server.version,
            "settings": server.settings,
            "pgbench": "the server's own (its bindir)",
        }
        log(f"{server_version(server.version)}; migrating")
        simindex.migrate(server.dsn)
        report["concurrency"] = concurrency(server.dsn, program, args, texts, tree)
    write_result(args.output, report, server.version)
    print_concurrency(report["concurrency"])
    print(f"\nwritten: {args.output} ({report['elapsed_seconds']:.0f} s)")


if __name__ == "__main__":
    main()
