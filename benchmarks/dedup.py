"""Finding every near-duplicate: all pairs and clusters of an index, beside in-memory peers.

    python benchmarks/dedup.py [--rows N] [--quick] [--embedded|--local] [--peer-rows M]
                               [--output PATH]
    python benchmarks/dedup.py --templates --rows N [--embedded|--local]

Starts a throwaway PostgreSQL tuned for the run (``pgserver.benchmark_server``: ``ALTER
SYSTEM`` and a restart), loads ``documents (id bigint primary key, body text)`` with real short
texts of this machine topped up with generated ones, 5 % planted near-duplicates
(``dataset.make_dataset``), and builds a SimHash (k=3) and a MinHash (threshold 0.8, 128
permutations) index over it, plus a SimHash index over random 64-bit fingerprints with planted
neighbours (``query_synthetic.synthetic_fingerprints``). Then, each in a fresh process
(multiprocessing spawn, ``dedup_children``) that connects, does the one thing and reports its
own peak RSS (``VmHWM``, see ``dedup_children.max_rss_mb``):

1. ``Index.pairs`` iterated to the end (counting, keeping nothing), per index;
2. ``Index.clusters(method="pairs")``, then ``cluster_members()`` and ``survivors()`` streamed,
   and ``Index.clusters(method="bottom_k")``;
3. on the first ``--peer-rows`` ids, indexed again: ours, the ``simhash`` package's
   ``SimhashIndex`` (k=3, ``get_near_dups`` for every row) and datasketch's ``MinHashLSH``
   (insert all, then query every row), fed the same fingerprints and signatures that our
   indexes store, so the pairs compare one for one; our SimHash pairs are checked against a
   numpy brute force over the prefix.

The server side of each phase: temporary files written (``pg_stat_database`` delta). Prints
side-by-side tables (stdout; progress on stderr) and writes every figure as JSON to
``benchmarks/results/dedup.json`` (``dedup-<rows>.json`` for other sizes). Not a test: nothing
here asserts a timing.

``--templates``: the same short texts with template clusters planted (``dedup_templates``:
exact copies up to 4,910 of one text, as real package summaries have, and one-word variants),
then ``pairs()``, ``pairs(groups=True)`` and ``clusters()`` of SimHash k=3 and MinHash 0.8
only; written to ``dedup-templates-<rows>.json``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import report as reporting
from dataset import Planted, make_dataset
from dedup_children import (
    MB,
    child_clusters,
    child_datasketch_peer,
    child_members,
    child_pairs,
    child_simhash_peer,
)
from dedup_tables import TARGETS, print_report
from dedup_templates import template_phases, template_texts
from numpy.typing import NDArray
from pgserver import (
    BuildProgress,
    Conn,
    add_server_options,
    benchmark_server,
    explain_analyze,
    load_table,
    prewarm,
    relation_sizes,
    scalar,
)
from psycopg import sql
from query_plan import (
    DEFAULT_ROWS,
    MAX_DISTANCE,
    MINHASH_THRESHOLD,
    NUM_PERM,
    QUICK_ROWS,
    SEED,
    SERVER_SETTINGS,
)
from query_synthetic import load_synthetic, synthetic_fingerprints
from report import (
    RESULTS,
    log,
    new_result,
    package_versions,
    read_result,
    server_version,
    write_result,
)

import simindex
from simindex.core.spec import MinHash, SimHash
from simindex.db.catalog import ready_index, store_for
from simindex.db.cluster_store import ClusterStore
from simindex.db.simhash_store import SimHashStore
from simindex.db.statements import statement
from simindex.index import Index, create_index
from simindex.ops.pairs import pairs_queries

Pair = tuple[int, int]

DEFAULT_PEER_ROWS = 100_000
QUICK_PEER_ROWS = 5_000
BRUTE_FORCE_CHUNK = 128


def temp_usage(dsn: str) -> tuple[int, int]:
    """(temporary files, bytes) this database has written since its statistics were reset."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT temp_files, temp_bytes FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def measured(dsn: str, task: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """``task(started, dsn, *args)`` in a fresh spawned process, with the server's temp files."""
    files, written = temp_usage(dsn)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        result = pool.submit(task, reporting.STARTED, dsn, *args).result()
    # The child's backend reports its statistics as it exits, just after the child does.
    time.sleep(1.5)
    files_after, written_after = temp_usage(dsn)
    result["server_temp_files"] = files_after - files
    result["server_temp_mb"] = round((written_after - written) / MB, 1)
    result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return result


# --------------------------------------------------------------------------------------------
# Data and indexes


def build_index(dsn: str, name: str, table: str, method: SimHash | MinHash) -> dict[str, Any]:
    """create_index + build; the side tables prewarmed; build figures and sizes."""
    log(f"{name}: create_index + build")
    index = create_index(dsn, name, table, "body", method=method)
    report = index.build(progress=BuildProgress(f"{name} build"))
    info = index.info()
    store = store_for("simindex", name, info.source, info.spec)
    tables = store.side_tables()
    with psycopg.connect(dsn, autocommit=True) as conn:
        sizes = relation_sizes(conn, tables)
        blocks = prewarm(conn, tables)
    log(f"{name}: built {report.rows:,} rows in {report.seconds:.1f} s")
    if isinstance(store, SimHashStore):
        design = {"num_blocks": store.design.num_blocks, "tables": store.design.table_count}
    else:
        design = {
            "num_bands": store.design.num_bands,
            "rows_per_band": store.design.rows_per_band,
            "num_perm": store.num_perm,
        }
    return {
        "rows": report.rows,
        "skipped": report.skipped,
        "build_seconds": round(report.seconds, 2),
        "design": design,
        **sizes,
        "prewarmed_blocks": blocks,
    }


def side_table(dsn: str, name: str) -> sql.Identifier:
    """The SimHash side table, or the MinHash signatures table, of index ``name``."""
    info = Index(dsn, name).info()
    store = store_for("simindex", name, info.source, info.spec)
    return store.table()


def load_planted(conn: Conn, planted: Sequence[Planted]) -> None:
    conn.execute("CREATE TABLE planted_pairs (copy bigint, source bigint, kind text)")
    with conn.cursor().copy("COPY planted_pairs (copy, source, kind) FROM STDIN") as copy:
        for p in planted:
            copy.write_row((p.copy, p.source, p.kind))


def planted_together(dsn: str, name: str) -> dict[str, str]:
    """Per kind of planted copy: how many share a cluster with their source."""
    table = ClusterStore("simindex", name).table
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            sql.SQL(
                "SELECT p.kind, count(*), count(*) FILTER (WHERE a.cluster_id = b.cluster_id) "
                "FROM planted_pairs AS p JOIN {0} AS a ON a.key = p.copy "
                "JOIN {0} AS b ON b.key = p.source GROUP BY p.kind ORDER BY p.kind"
            ).format(table)
        ).fetchall()
    return {str(kind): f"{together:,} of {total:,}" for kind, total, together in rows}


def explain_pairs(
    dsn: str, name: str, max_distance: int | None, threshold: float | None
) -> dict[str, Any]:
    """The first Manku table's (or band's) pairs query: its plan as a server-side cursor gets
    it (DECLARE, not run), and EXPLAIN ANALYZE of the plain SELECT, with pairs' work_mem."""
    with psycopg.connect(dsn) as conn:
        info, store = ready_index(conn, "simindex", name)
        queries = pairs_queries(info, store, max_distance=max_distance, threshold=threshold)
        conn.execute(statement("pairs_work_mem"))
        cursor_plan = conn.execute(
            sql.SQL("EXPLAIN DECLARE dedup_explain CURSOR FOR {}").format(queries[0])
        ).fetchall()
        analyzed = explain_analyze(conn, queries[0])
        conn.rollback()
    return {
        "parts": len(queries),
        "statement_part_0": queries[0].as_string(None),
        "declare_cursor_plan": [str(row[0]) for row in cursor_plan],
        "select_explain_analyze": analyzed,
    }


# --------------------------------------------------------------------------------------------
# Brute force and comparisons


def brute_force_pairs(keys: NDArray[np.int64], stored: NDArray[np.int64], k: int) -> set[Pair]:
    """Every pair within ``k`` bits, by XOR and popcount over all n(n-1)/2 pairs in numpy."""
    values = stored.view(np.uint64)
    found: set[Pair] = set()
    for start in range(0, len(values), BRUTE_FORCE_CHUNK):
        block = values[start : start + BRUTE_FORCE_CHUNK]
        distances = np.bitwise_count(block[:, None] ^ values[None, start:])
        rows, columns = np.nonzero(distances <= k)
        columns = columns + start
        later = columns > rows + start
        for a, b in zip((rows[later] + start).tolist(), columns[later].tolist(), strict=True):
            found.add((int(keys[a]), int(keys[b])))
    return found


def read_side(dsn: str, side: sql.Identifier) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            sql.SQL("SELECT key, fingerprint FROM {} ORDER BY key").format(side)
        ).fetchall()
    return (
        np.array([r[0] for r in rows], dtype=np.int64),
        np.array([r[1] for r in rows], dtype=np.int64),
    )


def our_pairs(dsn: str, name: str, max_distance: int | None, threshold: float | None) -> set[Pair]:
    """Our pairs kept in a set (not timed): for comparison only."""
    return {
        (int(p.left), int(p.right))
        for p in Index(dsn, name).pairs(max_distance=max_distance, threshold=threshold)
    }


def agreement(ours: set[Pair], theirs: set[Pair], label: str) -> dict[str, Any]:
    both = len(ours & theirs)
    return {
        "ours": len(ours),
        label: len(theirs),
        "both": both,
        f"ours_found_of_{label}": _share(both, len(theirs)),
        f"{label}_found_of_ours": _share(both, len(ours)),
    }


def _share(part: int, whole: int) -> float | None:
    return None if whole == 0 else round(part / whole, 6)


# --------------------------------------------------------------------------------------------
# The run


def full_scale(report: dict[str, Any], dsn: str, rows: int) -> None:
    text_simhash = SimHash(max_distance=MAX_DISTANCE, expected_rows=rows)
    text_minhash = MinHash(threshold=MINHASH_THRESHOLD, num_perm=NUM_PERM)
    indexes = report["indexes"] = {
        "docs": build_index(dsn, "docs", "documents", text_simhash),
        "docs_minhash": build_index(dsn, "docs_minhash", "documents", text_minhash),
    }
    log(f"synthetic: {rows:,} random fingerprints with planted neighbours")
    values, planted = synthetic_fingerprints(rows, np.random.default_rng(SEED + 3))
    started = time.perf_counter()
    _, store, phases, sizes = load_synthetic(dsn, "synth", "synthetic_documents", values)
    del values
    indexes["synth"] = {
        "rows": rows,
        "planted_neighbours": planted,
        "load_seconds": round(time.perf_counter() - started, 2),
        "load": phases,
        "design": {"num_blocks": store.design.num_blocks, "tables": store.design.table_count},
        **sizes,
    }
    phases_report: dict[str, Any] = report.setdefault("phases", {})

    def run(label: str, task: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
        log(f"phase: {label}")
        result = measured(dsn, task, *args)
        phases_report[label] = result
        log(
            f"phase: {label}: {result['seconds']:.1f} s, peak RSS {result['peak_rss_mb']:.0f} MB"
            f", server temp {result['server_temp_mb']:.0f} MB"
        )
        return result

    run("simhash text pairs", child_pairs, "docs", MAX_DISTANCE, None)
    run("simhash text clusters", child_clusters, "docs", "pairs")
    phases_report["simhash text clusters"]["planted_copy_with_source"] = planted_together(
        dsn, "docs"
    )
    run("simhash text members and survivors", child_members, "docs")
    run("simhash text clusters bottom_k", child_clusters, "docs", "bottom_k")
    run("simhash synthetic pairs", child_pairs, "synth", MAX_DISTANCE, None)
    run("simhash synthetic clusters", child_clusters, "synth", "pairs")
    run("minhash text pairs", child_pairs, "docs_minhash", None, MINHASH_THRESHOLD)
    run("minhash text clusters", child_clusters, "docs_minhash", "pairs")
    phases_report["minhash text clusters"]["planted_copy_with_source"] = planted_together(
        dsn, "docs_minhash"
    )
    log("EXPLAIN of the first pairs query of each index")
    report["explain"] = {
        "docs": explain_pairs(dsn, "docs", MAX_DISTANCE, None),
        "synth": explain_pairs(dsn, "synth", MAX_DISTANCE, None),
        "docs_minhash": explain_pairs(dsn, "docs_minhash", None, MINHASH_THRESHOLD),
    }


def peers(report: dict[str, Any], dsn: str, peer_rows: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE documents_prefix AS SELECT * FROM documents WHERE id <= %s",
            (peer_rows,),
            prepare=False,
        )
        conn.execute("ALTER TABLE documents_prefix ADD PRIMARY KEY (id)")
        conn.execute("VACUUM (ANALYZE) documents_prefix")
        prefix_rows = int(scalar(conn, "SELECT count(*) FROM documents_prefix"))
    log(f"peers: the first {prefix_rows:,} ids")
    result: dict[str, Any] = {"rows": prefix_rows}
    report["peers"] = result
    simhash = SimHash(max_distance=MAX_DISTANCE, expected_rows=prefix_rows)
    minhash = MinHash(threshold=MINHASH_THRESHOLD, num_perm=NUM_PERM)
    result["indexes"] = {
        "prefix_simhash": build_index(dsn, "prefix_simhash", "documents_prefix", simhash),
        "prefix_minhash": build_index(dsn, "prefix_minhash", "documents_prefix", minhash),
    }

    log("peers: SimHash k=3, ours")
    ours = measured(dsn, child_pairs, "prefix_simhash", MAX_DISTANCE, None)
    ours_found = our_pairs(dsn, "prefix_simhash", MAX_DISTANCE, None)
    log("peers: SimHash k=3, numpy brute force over the same fingerprints")
    keys, stored = read_side(dsn, side_table(dsn, "prefix_simhash"))
    started = time.perf_counter()
    brute = brute_force_pairs(keys, stored, MAX_DISTANCE)
    brute_seconds = time.perf_counter() - started
    log(f"peers: brute force found {len(brute):,} pairs in {brute_seconds:.1f} s")
    log("peers: SimHash k=3, the simhash package")
    package = measured(dsn, child_simhash_peer, side_table(dsn, "prefix_simhash"), MAX_DISTANCE)
    package_found = set(map(tuple, package.pop("found")))
    result["simhash"] = {
        "input": "our stored 64-bit fingerprints of the prefix, fed to each",
        "ours": ours,
        "simhash_package": package,
        "numpy_brute_force": {"pairs": len(brute), "seconds": round(brute_seconds, 2)},
        "ours_vs_brute_force": agreement(ours_found, brute, "brute_force"),
        "ours_vs_simhash_package": agreement(ours_found, package_found, "simhash_package"),
        "ours_equals_brute_force": ours_found == brute,
    }

    log("peers: MinHash 0.8, ours")
    ours = measured(dsn, child_pairs, "prefix_minhash", None, MINHASH_THRESHOLD)
    ours_found = our_pairs(dsn, "prefix_minhash", None, MINHASH_THRESHOLD)
    log("peers: MinHash 0.8, datasketch MinHashLSH")
    lsh = measured(
        dsn,
        child_datasketch_peer,
        "prefix_minhash",
        MINHASH_THRESHOLD,
        NUM_PERM,
    )
    lsh_found = set(map(tuple, lsh.pop("found")))
    result["minhash"] = {
        "input": "our 128-value signatures of the prefix (computed from the texts as the "
        "index does; it stores band keys and a sketch), fed to each; datasketch's "
        "candidates checked by estimated Jaccard >= threshold afterwards (not timed)",
        "ours": ours,
        "datasketch": lsh,
        "ours_vs_datasketch_verified": agreement(ours_found, lsh_found, "datasketch"),
    }


def default_output(rows: int) -> Path:
    return RESULTS / ("dedup.json" if rows == DEFAULT_ROWS else f"dedup-{rows}.json")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, help=f"documents (default {DEFAULT_ROWS:,})")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK_ROWS:,} rows, peers on {QUICK_PEER_ROWS:,}: checks the script works",
    )
    add_server_options(parser)
    parser.add_argument(
        "--peer-rows",
        type=int,
        help=f"run the in-memory peers on the ids up to this (default {DEFAULT_PEER_ROWS:,})",
    )
    parser.add_argument(
        "--templates",
        action="store_true",
        help="a corpus with template clusters (up to 4,910 identical copies): pairs and "
        "clusters of SimHash and MinHash only, no synthetic index and no peers",
    )
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
    peer_rows = min(rows, args.peer_rows or (QUICK_PEER_ROWS if args.quick else DEFAULT_PEER_ROWS))
    output = args.output or default_output(rows)
    if args.templates and not args.output:
        output = RESULTS / f"dedup-templates-{rows}.json"
    report = new_result("dedup", argv, ("xxhash",))
    report |= {
        "peer_versions": package_versions(("datasketch", "simhash")),
        "targets": TARGETS,
        "how": {
            "phases": "each measured phase runs in a fresh process (multiprocessing spawn) that "
            "connects, does that one thing and reports its peak resident set: VmHWM of "
            "/proc/self/status (ru_maxrss is kept too, but Linux carries it across the exec "
            "of a spawned child, so it shows at least the parent's size at the fork); pairs "
            "are counted, not kept; side tables prewarmed (pg_prewarm)",
            "server_temp": "pg_stat_database temp_files/temp_bytes before and after the phase",
            "peers": f"the first {peer_rows:,} ids, each tool fed the fingerprints or "
            "signatures our indexes store; times exclude making those",
        },
    }
    with benchmark_server(args.server, SERVER_SETTINGS) as server:
        report["server"] = {
            "kind": server.kind,
            "version": server.version,
            "settings": server.settings,
        }
        log(f"{server_version(server.version)} ({server.kind}); migrating")
        simindex.migrate(server.dsn)
        log(f"data: {rows:,} documents")
        if args.templates:
            texts, summary = template_texts(rows)
            with psycopg.connect(server.dsn, autocommit=True) as conn:
                load = load_table(conn, "documents", enumerate(texts, start=1))
            report["data"] = {**summary, "documents_table": load}
            del texts
            template_phases(report, server.dsn, measured, build_index)
            write_result(output, report, server.version)
            print_report(report)
            print(f"\nwritten: {output} ({report['elapsed_seconds']:.0f} s)")
            return
        dataset = make_dataset(rows, None)
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            load = load_table(conn, "documents", enumerate(dataset.texts, start=1))
            load_planted(conn, dataset.planted)
        report["data"] = {
            **dataset.summary,
            "documents_table": load,
            "used_by": "docs (SimHash k=3) and docs_minhash (MinHash 0.8) over the same rows; "
            "synth: as many random fingerprints, loaded straight into a SimHash side table",
        }
        del dataset
        full_scale(report, server.dsn, rows)
        peers(report, server.dsn, peer_rows)
    write_result(output, report, server.version)
    print_report(report)
    print(f"\nwritten: {output} ({report['elapsed_seconds']:.0f} s)")


if __name__ == "__main__":
    main()
