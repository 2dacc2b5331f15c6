"""Trigger overhead: the app's INSERT, UPDATE of the text and DELETE with and without an index,
as one statement over many rows and as one-row transactions (part 3 of ``benchmarks/sync.py``,
or on its own: ``python benchmarks/sync_overhead.py``).

The bulk statements read their rows from a third table, so that sending them costs nothing;
the queue is drained and the tables vacuumed between measurements (untimed), as a worker and
autovacuum would leave them. Both tables are measured in each round, in turns (the indexed
one first every other round), and one-row transactions in turns of 50 on both tables, so
that a slow second of a shared machine touches both. The ratios are indexed / plain.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
from pgserver import add_server_options
from psycopg import sql
from report import log, new_result, print_table, server_version, write_result

from simindex import sync
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
# One-row transactions run in turns of this many on each table, so that a slow second of the
# machine touches both.
SINGLES_TURN = 50


def _settle(dsn: str, conn: Conn, name: str) -> None:
    """Untimed, between measurements: the queue drained, dead rows vacuumed, as a worker and
    autovacuum would leave them."""
    sync(dsn, [name], batch_size=DEFAULT_BATCH_SIZE)
    tables = [sql.Identifier(table) for table in OVERHEAD_TABLES]
    tables += [
        sql.Identifier("simindex", f"{name}_{kind}") for kind in ("queue", "deletes", "simhash")
    ]
    for table in tables:
        conn.execute(sql.SQL("VACUUM ANALYZE {}").format(table))


def overhead(dsn: str, texts: list[str], singles: int, rounds: int) -> dict[str, Any]:
    """The app's INSERT, UPDATE of the text and DELETE, as one statement over ``len(texts)``
    rows (read from a third table, so that sending them costs nothing) and as ``singles``
    one-row transactions, into a table with an index and a twin without; the queue drained
    between measurements (untimed)."""
    name = "ovh"
    bulk: dict[str, dict[str, list[float]]] = {
        kind: {table: [] for table in OVERHEAD_TABLES} for kind in STATEMENTS
    }
    single: dict[str, dict[str, list[float]]] = {
        kind: {table: [] for table in OVERHEAD_TABLES} for kind in STATEMENTS
    }
    count = len(texts)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in (*OVERHEAD_TABLES, "ovh_texts"):
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(sql.Identifier(table)))
            conn.execute(
                sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, body text)").format(
                    sql.Identifier(table)
                )
            )
        with conn.cursor().copy("COPY ovh_texts (id, body) FROM STDIN") as copy:
            for key, text in enumerate(texts, start=1):
                copy.write_row((key, text))
        conn.execute("VACUUM ANALYZE ovh_texts")
        create_index(dsn, name, "ovh_indexed", "body").build()
        for round_ in range(rounds):
            # The indexed table first every other round: neither always runs on a warmer cache.
            order = OVERHEAD_TABLES if round_ % 2 == 0 else OVERHEAD_TABLES[::-1]
            for kind in STATEMENTS:
                for table in order:
                    query = sql.SQL(STATEMENTS[kind]).format(table=sql.Identifier(table))
                    started = time.perf_counter()
                    conn.execute(query)
                    bulk[kind][table].append(time.perf_counter() - started)
                _settle(dsn, conn, name)
            for kind in ONE_ROW:
                spent = dict.fromkeys(OVERHEAD_TABLES, 0.0)
                for turn in range(0, singles, SINGLES_TURN):
                    for table in order:
                        query = sql.SQL(ONE_ROW[kind]).format(table=sql.Identifier(table))
                        started = time.perf_counter()
                        for key in range(turn + 1, min(turn + SINGLES_TURN, singles) + 1):
                            params = (key, texts[key % count]) if kind == "insert" else (key,)
                            conn.execute(query, params, prepare=True)
                        spent[table] += time.perf_counter() - started
                for table in OVERHEAD_TABLES:
                    single[kind][table].append(spent[table])
                _settle(dsn, conn, name)
            log(
                f"overhead round {round_ + 1}: "
                + ", ".join(
                    f"{kind} x{bulk[kind]['ovh_indexed'][-1] / bulk[kind]['ovh_plain'][-1]:.2f}"
                    f"/x{single[kind]['ovh_indexed'][-1] / single[kind]['ovh_plain'][-1]:.2f}"
                    for kind in STATEMENTS
                )
            )
    drop_index(dsn, name)
    result: dict[str, Any] = {
        "rounds": rounds,
        "bulk_rows": count,
        "single_transactions": singles,
        "note": "median over rounds; plain and indexed in turns in each round (indexed first "
        "every other round); queue drained and tables vacuumed between measurements; "
        "no LISTENer connected (NOTIFY queues nothing then)",
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
    return result


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
    print_table(
        "Trigger overhead on the app's writes (median of rounds)",
        ["statement", "plain", "indexed", "ratio", "every round"],
        rows,
    )


TARGETS = {"bulk_ratio": 2.0, "single_ratio": 1.2}


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
    import corpus
    from sync import server

    import simindex

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=200_000, help="rows of a bulk statement")
    parser.add_argument("--singles", type=int, default=2000, help="one-row transactions")
    parser.add_argument("--rounds", type=int, default=5)
    add_server_options(parser)
    parser.add_argument(
        "--output", type=Path, default=Path(__file__).parent / "results/sync-overhead.json"
    )
    args = parser.parse_args(argv)
    report = new_result("sync_overhead", argv)
    report["sizes"] = {"bulk_rows": args.rows, "singles": args.singles, "rounds": args.rounds}
    report["targets_spec"] = TARGETS
    short = corpus.short_texts(min(args.rows, 145_000))
    texts = list(itertools.islice(itertools.cycle(short), args.rows))
    with server(args.server) as (dsn, info):
        report["server"] = info
        log(f"{server_version(info['version'])}; migrating")
        simindex.migrate(dsn)
        report["overhead"] = overhead(dsn, texts, args.singles, args.rounds)
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
