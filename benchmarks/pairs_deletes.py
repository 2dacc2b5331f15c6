"""What it costs that pairs never name a deleted row: ``Index.pairs()`` with its collapsed rows
filtered through the source, beside the same run without the filter, interleaved.

    python benchmarks/pairs_deletes.py [--rows 50000 100000] [--rounds 4] [--embedded|--local]
                                       [--output PATH]

Starts a throwaway PostgreSQL tuned for the run (``pgserver.benchmark_server``), loads
``documents (id bigint primary key, body text)`` with the dedup benchmark's texts
(``dataset.make_dataset``: real short texts topped up with generated ones, 5 % planted
near-duplicates), builds a SimHash (k=3) and a MinHash (threshold 0.8) index and, per size and
index, ``rounds`` times in A-B-B-A order:

1. ``pairs()`` iterated to the end as simindex runs it (``filtered``: the collapsed rows are a
   semi-join of the side table with the source, ``pairs_node_of``), MinHash verified by the
   estimate (exact verification reads texts, whose cost would drown the difference);
2. the same with the statement as it was before (``unfiltered``: every side-table row);
3. the collapse statement alone, filtered and unfiltered (in a transaction rolled back);

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
from simindex.db.catalog import read_index, store_of
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


def timed_pairs(
    index: simindex.Index, arguments: dict[str, Any], *, filtered: bool
) -> tuple[float, set[Any]]:
    """Seconds to iterate pairs() to the end, and every key named."""
    # The one name ops.pairs runs its statements by: the old block in place of the new.
    vars(pairs_module)["statement"] = statement if filtered else unfiltered_statement
    try:
        named: set[Any] = set()
        started = time.perf_counter()
        for pair in index.pairs(**arguments):
            named.add(pair.left)
            named.add(pair.right)
        return time.perf_counter() - started, named
    finally:
        vars(pairs_module)["statement"] = statement


def timed_collapse(dsn: str, side: sql.Composable, kind: str, *, filtered: bool) -> float:
    """Seconds of the collapse statement alone (pairs_node_of), rolled back."""
    identity = sql.SQL("s.fingerprint" if kind == "simhash" else "s.set_hash, s.sketch")
    if filtered:
        query = statement(
            "pairs_node_of",
            side=side,
            identity=identity,
            source=sql.Identifier("public", "documents"),
            key=sql.Identifier("id"),
        )
    else:
        query = unfiltered_statement("pairs_node_of", side=side, identity=identity)
    with psycopg.connect(dsn) as conn:
        conn.execute("SET LOCAL work_mem = '256MB'")
        started = time.perf_counter()
        conn.execute(query)
        seconds = time.perf_counter() - started
        conn.rollback()
    return seconds


def side_table(dsn: str, name: str) -> sql.Composable:
    """The index's side table, as simindex names it."""
    with psycopg.connect(dsn) as conn:
        return store_of(read_index(conn, "simindex", name)).table()


def measure(dsn: str, rows: int, rounds: int) -> dict[str, Any]:
    dataset = make_dataset(rows, None)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS documents CASCADE")
        load_table(conn, "documents", enumerate(dataset.texts, start=1))
    del dataset
    methods: dict[str, tuple[simindex.SimHash | simindex.MinHash, dict[str, Any], int]] = {
        "simhash": (simindex.SimHash(max_distance=MAX_DISTANCE), {}, 7),
        "minhash": (simindex.MinHash(MINHASH_THRESHOLD), {"verify": "estimate"}, 8),
    }
    found: dict[str, Any] = {}
    for kind, (method, arguments, remainder) in methods.items():
        name = f"docs_{kind}_{rows}"
        index = simindex.create_index(dsn, name, "documents", "body", method=method)
        log(f"{rows:,} rows: building {kind}")
        index.build()
        side = side_table(dsn, name)
        times: dict[str, list[float]] = {
            "filtered": [],
            "unfiltered": [],
            "collapse_filtered": [],
            "collapse_unfiltered": [],
        }
        for round_number in range(rounds):
            order = (True, False) if round_number % 2 == 0 else (False, True)
            for filtered in (*order, *reversed(order)):
                mode = "filtered" if filtered else "unfiltered"
                times[mode].append(timed_pairs(index, arguments, filtered=filtered)[0])
                times[f"collapse_{mode}"].append(timed_collapse(dsn, side, kind, filtered=filtered))
        log(f"{rows:,} rows: {kind} timed; deleting 1 %")
        with psycopg.connect(dsn, autocommit=True) as conn:
            deleted = conn.execute(
                "DELETE FROM documents WHERE id %% 100 = %s RETURNING id", (remainder,)
            ).fetchall()
        gone = {key for (key,) in deleted}
        after_delete, named = timed_pairs(index, arguments, filtered=True)
        assert named.isdisjoint(gone), "a pair named a deleted row"
        started = time.perf_counter()
        report = simindex.sync(dsn, [name])
        sweep = time.perf_counter() - started
        index.drop()
        medians = {mode: statistics.median(values) for mode, values in times.items()}
        found[kind] = {
            "seconds": times,
            "median_filtered": round(medians["filtered"], 3),
            "median_unfiltered": round(medians["unfiltered"], 3),
            "ratio_filtered_to_unfiltered": round(medians["filtered"] / medians["unfiltered"], 3),
            "collapse_median_filtered": round(medians["collapse_filtered"], 4),
            "collapse_median_unfiltered": round(medians["collapse_unfiltered"], 4),
            "filter_cost_share_of_pairs": round(
                (medians["collapse_filtered"] - medians["collapse_unfiltered"])
                / medians["unfiltered"],
                4,
            ),
            "deleted_rows": len(gone),
            "pairs_seconds_with_unswept_deletes": round(after_delete, 3),
            "sweep_seconds": round(sweep, 3),
            "swept_rows": report.removed,
        }
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[50_000, 100_000])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--output", type=Path, default=RESULTS / "pairs-deletes.json")
    add_server_options(parser)
    args = parser.parse_args(argv)
    result = new_result("pairs_deletes", argv)
    result["method"] = (
        "per size and index: pairs() iterated to the end (MinHash verified by the estimate), "
        "filtered (as shipped) and unfiltered (the collapse statement as before), in A-B-B-A "
        "order, rounds times, and the collapse statement alone each time; medians; then 1 % of "
        "rows deleted, pairs() timed with the deletes unswept, then the worker's sweep"
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
            f"{each['collapse_median_unfiltered'] * 1000:.0f}",
            f"{each['collapse_median_filtered'] * 1000:.0f}",
            f"{each['filter_cost_share_of_pairs']:.1%}",
            f"{each['pairs_seconds_with_unswept_deletes']:.2f}",
            f"{each['sweep_seconds']:.2f}",
        ]
        for rows in args.rows
        for kind, each in result["sizes"][str(rows)].items()
    ]
    print_table(
        f"pairs(), seconds; collapse, ms ({server_version(result['server']['version'])})",
        [
            "rows",
            "index",
            "unfiltered",
            "filtered",
            "ratio",
            "collapse",
            "filtered",
            "filter/pairs",
            "1% deleted",
            "sweep",
        ],
        table,
    )
    print(f"\nwritten: {args.output}")


if __name__ == "__main__":
    main()
