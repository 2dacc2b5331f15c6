"""Bytes a row of a MinHash side table as built and after new rows, for other index layouts.

    python benchmarks/storage_churn.py [--rows N] [--embedded|--local] [--output PATH]

Builds the default MinHash index (0.8, 128 values) over N short texts (``make_dataset``), then
copies its side table into variants and inserts rows of random band keys and set hashes (new
texts unlike the others) into each, 1 % and then 4 % more of the rows: the bytes a row each
variant holds as built, and after them. The variants: the built indexes at fillfactor 90
(btree's default, what a build makes), 95 and 100; and ``merged``, the first band's index on
``(b0, set_hash, key)`` in place of the ``(b0)`` and ``(set_hash, key)`` indexes (the rows
of one shingle set share every band key, so that index answers the rows of a set in key
order as well). A leaf packed full splits on its first insert. Writes
``benchmarks/results/storage-churn-<rows>.json``. Not a test: nothing here asserts a size.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
from dataset import make_dataset
from pgserver import Conn, add_server_options, benchmark_server, load_table, scalar
from psycopg import sql
from query_plan import SERVER_SETTINGS, SHORT_WORDS_LIMIT
from report import RESULTS, log, new_result, print_table, write_result

import simindex
from simindex.core.design import LshDesign
from simindex.core.spec import MinHash

VARIANTS = ("90", "95", "100", "merged")
GROWTH = (0.01, 0.04)  # shares of the built rows inserted, one after the other


def bytes_a_row(conn: Conn, table: str) -> dict[str, float]:
    heap = int(scalar(conn, "SELECT pg_table_size(%s::regclass)", (table,)))
    index = int(scalar(conn, "SELECT pg_indexes_size(%s::regclass)", (table,)))
    rows = int(scalar(conn, sql.SQL("SELECT count(*) FROM {}").format(sql.SQL(table))))
    return {
        "rows": rows,
        "heap": round(heap / rows, 1),
        "index": round(index / rows, 1),
        "total": round((heap + index) / rows, 1),
    }


def variant(conn: Conn, side: str, name: str, bands: int) -> list[dict[str, float]]:
    """The side table copied as ``name`` lays it out, as built and after each growth."""
    table = sql.Identifier(f"churn_{name}")
    conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
    conn.execute(sql.SQL("CREATE TABLE {} AS SELECT * FROM {}").format(table, sql.SQL(side)))
    fill = sql.SQL("" if name == "merged" else f"WITH (fillfactor = {int(name)})")
    conn.execute(sql.SQL("ALTER TABLE {} ADD PRIMARY KEY (key) {}").format(table, fill))
    for band in range(bands):
        columns = sql.SQL("b0, set_hash, key" if name == "merged" and band == 0 else f"b{band}")
        conn.execute(sql.SQL("CREATE INDEX ON {} ({}) {}").format(table, columns, fill))
    if name != "merged":
        conn.execute(sql.SQL("CREATE INDEX ON {} (set_hash, key) {}").format(table, fill))
    conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(table))
    found = [bytes_a_row(conn, f"churn_{name}")]
    built = found[0]["rows"]
    random_band = sql.SQL("(random() * 4294967295 - 2147483648)::integer")
    for share in GROWTH:
        top = int(scalar(conn, sql.SQL("SELECT max(key) FROM {}").format(table)))
        conn.execute(
            sql.SQL(
                "INSERT INTO {table} SELECT g, (random() * 9e18)::bigint, {bands}, s.sketch "
                "FROM generate_series(%s::bigint, %s::bigint) AS g "
                "CROSS JOIN (SELECT sketch FROM {table} LIMIT 1) AS s"
            ).format(table=table, bands=sql.SQL(", ").join([random_band] * bands)),
            (top + 1, top + round(built * share)),
        )
        found.append(bytes_a_row(conn, f"churn_{name}"))
    return found


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=100_000, help="short texts loaded")
    add_server_options(parser, default="local")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    output = args.output or RESULTS / f"storage-churn-{args.rows}.json"
    report = new_result("storage_churn", argv)
    with benchmark_server(args.server, SERVER_SETTINGS) as server:
        simindex.migrate(server.dsn)
        dataset = make_dataset(round(args.rows * 1.15), None)
        short = [text for text in dataset.texts if len(text.split()) <= SHORT_WORDS_LIMIT]
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            load_table(conn, "short_texts", enumerate(short[: args.rows], start=1))
        del dataset, short
        method = MinHash(0.8, 128)
        index = simindex.create_index(server.dsn, "churn", "short_texts", "body", method=method)
        log("build")
        index.build()
        design = index.info().spec.design
        assert isinstance(design, LshDesign)
        bands = design.num_bands
        results: dict[str, Any] = {}
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            results["built by simindex"] = bytes_a_row(conn, "simindex.churn_minhash")
            for name in VARIANTS:
                log(f"variant {name}")
                results[name] = variant(conn, "simindex.churn_minhash", name, bands)
    report["growth"] = list(GROWTH)
    report["variants"] = results
    write_result(output, report, server.version)
    rows = [
        [name, *(f"{step['total']:.1f}" for step in steps)]
        for name, steps in results.items()
        if isinstance(steps, list)
    ]
    print_table(
        "MinHash bytes a row (heap and indexes): as built, +1 % rows, +5 % rows",
        ["layout", "built", "+1 %", "+5 %"],
        rows,
    )
    print(f"\nwritten: {output}")


if __name__ == "__main__":
    main()
