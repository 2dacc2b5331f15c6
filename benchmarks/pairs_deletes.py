"""What it costs that pairs never name a deleted row: ``Index.pairs()`` with its collapsed rows
filtered through the source, beside the same run without the filter, interleaved.

    python benchmarks/pairs_deletes.py [--rows 50000 100000] [--rounds 3] [--embedded|--local]
                                       [--output PATH]

Starts a throwaway PostgreSQL tuned for the run (``pgserver.benchmark_server``), loads
``documents (id bigint primary key, body text)`` with the dedup benchmark's texts
(``dataset.make_dataset``: real short texts topped up with generated ones, 5 % planted
near-duplicates), builds a SimHash (k=3) and a MinHash (threshold 0.8) index and, per size and
round, in turn:

1. ``pairs()`` iterated to the end as simindex runs it (``filtered``: the collapsed rows are a
   semi-join of the side table with the source, ``pairs_node_of``);
2. the same with the statement as it was before (``unfiltered``: every side-table row);

then deletes 1 % of the rows (not swept: the worker has not come) and times ``pairs()`` again
(it must name none of them), then the worker's sweep (``sync``), the alternative of sweeping
before each pairs run. Prints medians and ratios; writes JSON to
``benchmarks/results/pairs-deletes.json``. Not a test: nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import psycopg
from dataset import make_dataset
from pgserver import add_server_options, benchmark_server, load_table
from psycopg import sql
from query_plan import MAX_DISTANCE, MINHASH_THRESHOLD, SERVER_SETTINGS
from report import log, new_result, print_table, server_version, write_result

import simindex
import simindex.ops.pairs as pairs_module
from simindex.db.statements import statement

RESULTS = Path(__file__).parent / "results"
# pairs_node_of before pairs were filtered through the source: every side-table row.
UNFILTERED_NODE_OF = (
    "CREATE TEMP TABLE simindex_node_of ON COMMIT DROP AS\n"
    "SELECT s.key, first_value(s.key) OVER (PARTITION BY {identity} ORDER BY s.key) AS node\n"
    "FROM {side} AS s"
)


def unfiltered_statement(name: str, **parts: sql.Composable) -> sql.Composed:
    if name == "pairs_node_of":
        return sql.SQL(UNFILTERED_NODE_OF).format(side=parts["side"], identity=parts["identity"])
    return statement(name, **parts)


def timed_pairs(index: simindex.Index, *, filtered: bool) -> tuple[float, set[Any]]:
    """Seconds to iterate pairs() to the end, and every key named."""
    # The one name ops.pairs runs its statements by: the old block in place of the new.
    vars(pairs_module)["statement"] = statement if filtered else unfiltered_statement
    try:
        named: set[Any] = set()
        started = time.perf_counter()
        for pair in index.pairs():
            named.add(pair.left)
            named.add(pair.right)
        return time.perf_counter() - started, named
    finally:
        vars(pairs_module)["statement"] = statement


def measure(dsn: str, rows: int, rounds: int) -> dict[str, Any]:
    dataset = make_dataset(rows, None)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS documents CASCADE")
        load_table(conn, "documents", enumerate(dataset.texts, start=1))
    del dataset
    methods: dict[str, simindex.SimHash | simindex.MinHash] = {
        "simhash": simindex.SimHash(max_distance=MAX_DISTANCE),
        "minhash": simindex.MinHash(MINHASH_THRESHOLD),
    }
    found: dict[str, Any] = {}
    for kind, method in methods.items():
        name = f"docs_{kind}_{rows}"
        index = simindex.create_index(dsn, name, "documents", "body", method=method)
        log(f"{rows:,} rows: building {kind}")
        index.build()
        times: dict[str, list[float]] = {"filtered": [], "unfiltered": []}
        for _ in range(rounds):
            for mode in ("filtered", "unfiltered"):
                seconds, _named = timed_pairs(index, filtered=mode == "filtered")
                times[mode].append(seconds)
        with psycopg.connect(dsn, autocommit=True) as conn:
            deleted = conn.execute(
                "DELETE FROM documents WHERE id % 100 = 7 RETURNING id"
            ).fetchall()
        gone = {key for (key,) in deleted}
        after_delete, named = timed_pairs(index, filtered=True)
        assert named.isdisjoint(gone), "a pair named a deleted row"
        started = time.perf_counter()
        report = simindex.sync(dsn, [name])
        sweep = time.perf_counter() - started
        index.drop()
        filtered, unfiltered = (statistics.median(times[m]) for m in ("filtered", "unfiltered"))
        found[kind] = {
            "pairs_seconds": times,
            "median_filtered": round(filtered, 3),
            "median_unfiltered": round(unfiltered, 3),
            "ratio_filtered_to_unfiltered": round(filtered / unfiltered, 3),
            "deleted_rows": len(gone),
            "pairs_seconds_with_unswept_deletes": round(after_delete, 3),
            "sweep_seconds": round(sweep, 3),
            "swept_rows": report.removed,
        }
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[50_000, 100_000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--output", type=Path, default=RESULTS / "pairs-deletes.json")
    add_server_options(parser)
    args = parser.parse_args(argv)
    result = new_result("pairs_deletes", argv)
    result["method"] = (
        "per size: pairs() iterated to the end, filtered (as shipped) and unfiltered (the "
        "collapse statement as before), alternating, rounds times; medians; then 1 % of rows "
        "deleted and pairs() timed with the deletes unswept, then the worker's sweep"
    )
    with benchmark_server(args.server, SERVER_SETTINGS) as server:
        simindex.migrate(server.dsn)
        result["server"] = {"kind": server.kind, "version": server.version}
        result["sizes"] = {str(rows): measure(server.dsn, rows, args.rounds) for rows in args.rows}
        write_result(args.output, result, server.version)
    table = [
        [
            f"{rows:,}",
            kind,
            f"{each['median_unfiltered']:.2f}",
            f"{each['median_filtered']:.2f}",
            f"{each['ratio_filtered_to_unfiltered']:.2f}",
            f"{each['pairs_seconds_with_unswept_deletes']:.2f}",
            f"{each['sweep_seconds']:.2f}",
        ]
        for rows in args.rows
        for kind, each in result["sizes"][str(rows)].items()
    ]
    print_table(
        f"pairs(), seconds ({server_version(result['server']['version'])})",
        ["rows", "index", "unfiltered", "filtered", "ratio", "1% deleted", "sweep"],
        table,
    )
    print(f"\nwritten: {args.output}")


if __name__ == "__main__":
    main()
