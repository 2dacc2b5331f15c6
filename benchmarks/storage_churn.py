"""Bytes a row of a MinHash side table, relation by relation, as built and after new rows, for
other index layouts and sketch sizes.

    python benchmarks/storage_churn.py [--rows N] [--corpus-rows M | --templates]
                                       [--layouts A,B] [--embedded|--local] [--output PATH]

Builds the default MinHash index (0.8, 128 values) over N short texts: the first N of the
corpus ``make_dataset`` makes for M rows (M = N by default; ``--corpus-rows 1000000`` draws a
uniform sample of the corpus ``query.py --rows 1000000`` indexes, three quarters of it
generated texts, which repeat few band keys; ``--templates``: ``query_templates.py``'s texts,
template clusters planted in them, which repeat many). For the side table simindex built: each
relation's bytes a row (the heap with its free space and visibility maps, the primary key,
the first band's ``(b0, set_hash, key)`` index, the other band indexes), btree levels and
leaf fill, the heap's rows a page, and the share of distinct band keys (btree deduplication
packs repeated keys: a corpus of many copies costs less a row than one of unique texts).

Then copies of the table in other layouts, into each of which rows of random band keys and
set hashes (new texts unlike the others) are inserted, 1 % and then 4 % more of the rows: the
bytes a row each holds as built and after them. The layouts: simindex's own (indexes at
btree's default fillfactor 90), the same at fillfactor 95 and 100 (a leaf packed full splits
on its first insert), ``separate`` (a ``(b0)`` index and a ``(set_hash, key)`` index, as
before they were merged), and the sketch cut to other sizes (the heap's rows a page). Writes
``benchmarks/results/storage-churn-<N>[-of-<M>|-templates].json``. Not a test: nothing here
asserts a size.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
from dataset import make_dataset
from dedup_templates import template_texts
from pgserver import Conn, add_server_options, benchmark_server, load_table, scalar
from psycopg import sql
from query_plan import SERVER_SETTINGS, SHORT_WORDS_LIMIT
from report import RESULTS, log, new_result, print_table, write_result

import simindex
from simindex.core.design import LshDesign
from simindex.core.spec import MinHash

GROWTH = (0.01, 0.04)  # shares of the built rows inserted, one after the other
SKETCH_BITS = (1536, 1664, 1792)


def relations(conn: Conn, table: str) -> dict[str, Any]:
    """Bytes a row of the table and of each of its indexes (btree levels, leaf fill)."""
    rows = int(scalar(conn, sql.SQL("SELECT count(*) FROM {}").format(sql.SQL(table))))
    heap_pages = int(scalar(conn, "SELECT pg_relation_size(%s::regclass) / 8192", (table,)))
    heap = int(scalar(conn, "SELECT pg_table_size(%s::regclass)", (table,)))
    found: dict[str, Any] = {
        "rows": rows,
        "heap": round(heap / rows, 1),
        "heap_rows_a_page": round(rows / max(heap_pages, 1), 2),
        "indexes": {},
    }
    indexes = conn.execute(
        "SELECT c.oid::regclass::text, split_part(pg_get_indexdef(c.oid), ' USING btree ', 2), "
        "pg_relation_size(c.oid), s.tree_level, round(s.avg_leaf_density::numeric, 1) "
        "FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid, "
        "LATERAL pgstatindex(c.oid::regclass) AS s WHERE i.indrelid = %s::regclass "
        "ORDER BY c.relname",
        (table,),
    ).fetchall()
    total = heap
    for _, columns, size, level, density in indexes:
        total += size
        found["indexes"][columns] = {
            "bytes_a_row": round(size / rows, 1),
            "levels": level + 1,
            "leaf_fill": float(density),
        }
    found["index"] = round((total - heap) / rows, 1)
    found["total"] = round(total / rows, 1)
    return found


def summary(found: dict[str, Any]) -> dict[str, float]:
    """Heap, the primary key, the first band's index, the other band indexes, the rest."""
    parts = {"heap": found["heap"], "primary key": 0.0, "b0": 0.0, "other bands": 0.0}
    for columns, index in found["indexes"].items():
        if columns.startswith("(key)"):
            parts["primary key"] += index["bytes_a_row"]
        elif columns.startswith("(b0,") or columns.startswith("(b0)"):
            parts["b0"] += index["bytes_a_row"]
        elif columns.startswith("(b"):
            parts["other bands"] += index["bytes_a_row"]
        else:
            parts[columns] = parts.get(columns, 0.0) + index["bytes_a_row"]
    return {name: round(value, 1) for name, value in parts.items()} | {"total": found["total"]}


def distinct_share(conn: Conn, table: str, bands: int) -> dict[str, float]:
    """Distinct set hashes and band keys (the mean over bands), as shares of the rows."""
    counts = ", ".join(f"count(DISTINCT b{band})" for band in range(bands))
    row = conn.execute(
        sql.SQL(f"SELECT count(*), count(DISTINCT set_hash), {counts} FROM {{}}").format(
            sql.SQL(table)
        )
    ).fetchone()
    assert row is not None
    rows = max(int(row[0]), 1)
    return {
        "set_hashes": round(row[1] / rows, 3),
        "band_keys": round(sum(row[2:]) / bands / rows, 3),
    }


def variant(
    conn: Conn, side: str, name: str, bands: int, fill: int, separate: bool, bits: int
) -> list[dict[str, Any]]:
    """The side table copied in a layout, as built and after each growth."""
    table = sql.Identifier(f"churn_{name.replace(' ', '_')}")
    with_fill = sql.SQL(f"WITH (fillfactor = {fill})")
    conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
    band_columns = sql.SQL(", ").join(sql.Identifier(f"b{band}") for band in range(bands))
    conn.execute(
        sql.SQL(
            "CREATE TABLE {} AS SELECT key, set_hash, {}, "
            "substring(sketch from 1 for {bits})::bit({bits}) AS sketch FROM {} ORDER BY ctid"
        ).format(table, band_columns, sql.SQL(side), bits=sql.Literal(bits))
    )
    conn.execute(sql.SQL("ALTER TABLE {} ADD PRIMARY KEY (key) {}").format(table, with_fill))
    for band in range(bands):
        columns = f"b{band}" if separate or band else "b0, set_hash, key"
        conn.execute(
            sql.SQL("CREATE INDEX ON {} ({}) {}").format(table, sql.SQL(columns), with_fill)
        )
    if separate:
        conn.execute(sql.SQL("CREATE INDEX ON {} (set_hash, key) {}").format(table, with_fill))
    conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(table))
    name_text = table.as_string(conn)
    found = [relations(conn, name_text)]
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
        conn.execute(sql.SQL("VACUUM {}").format(table))
        found.append(relations(conn, name_text))
    conn.execute(sql.SQL("DROP TABLE {}").format(table))
    return found


def layouts(built_bits: int) -> list[tuple[str, int, bool, int]]:
    """(name, fillfactor, separate set index, sketch bits) of each copy."""
    found = [
        ("as built", 90, False, built_bits),
        ("fillfactor 95", 95, False, built_bits),
        ("fillfactor 100", 100, False, built_bits),
        ("separate", 90, True, built_bits),
    ]
    return found + [
        (f"sketch {bits}", 90, False, bits) for bits in SKETCH_BITS if bits < built_bits
    ]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=100_000, help="short texts loaded")
    parser.add_argument(
        "--corpus-rows", type=int, help="draw them from make_dataset's corpus of this many rows"
    )
    parser.add_argument("--templates", action="store_true", help="template clusters planted")
    parser.add_argument("--layouts", help="only these copies (names, comma-separated)")
    add_server_options(parser, default="local")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    corpus_rows = args.corpus_rows or args.rows
    suffix = "-templates" if args.templates else ""
    suffix += "" if corpus_rows == args.rows else f"-of-{corpus_rows}"
    output = args.output or RESULTS / f"storage-churn-{args.rows}{suffix}.json"
    report = new_result("storage_churn", argv)
    with benchmark_server(args.server, SERVER_SETTINGS) as server:
        simindex.migrate(server.dsn)
        if args.templates:
            short, facts = template_texts(args.rows)
        else:
            size = corpus_rows if args.corpus_rows else round(args.rows * 1.15)
            dataset = make_dataset(size, None)
            facts = dataset.summary
            short = [text for text in dataset.texts if len(text.split()) <= SHORT_WORDS_LIMIT]
            del dataset
        report["data"] = {
            key: value
            for key, value in facts.items()
            if key in ("rows", "real_rows", "generated_rows", "planted_rows", "template_clusters")
        }
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
            load_table(conn, "short_texts", enumerate(short[: args.rows], start=1))
        del short
        method = MinHash(0.8, 128)
        index = simindex.create_index(server.dsn, "churn", "short_texts", "body", method=method)
        log("build")
        index.build()
        spec = index.info().spec
        design = spec.design
        assert isinstance(design, LshDesign) and isinstance(spec.method, MinHash)
        bands, bits = design.num_bands, spec.method.sketch_bits
        side = "simindex.churn_minhash"
        results: dict[str, Any] = {}
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            built = relations(conn, side)
            results["built by simindex"] = {
                **built,
                "parts": summary(built),
                "distinct": distinct_share(conn, side, bands),
                "sketch_bits": bits,
            }
            chosen = args.layouts.split(",") if args.layouts else None
            for name, fill, separate, variant_bits in layouts(bits):
                if chosen is not None and name not in chosen:
                    continue
                log(f"layout {name}")
                steps = variant(conn, side, name, bands, fill, separate, variant_bits)
                results[name] = [{**step, "parts": summary(step)} for step in steps]
    report["growth"] = list(GROWTH)
    report["layouts"] = results
    write_result(output, report, server.version)
    print_table(
        "Bytes a row of the table simindex built, by relation",
        ["relation", "bytes/row"],
        [[part, f"{value:.1f}"] for part, value in results["built by simindex"]["parts"].items()],
    )
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
