"""The dedup benchmark's measured phases, each run in a fresh spawned process that reports
its own peak resident set."""

from __future__ import annotations

import logging
import math
import resource
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import report as reporting
from pgserver import REPORT_EVERY_SECONDS, Conn
from psycopg import sql
from report import log

from simindex.core.bits import to_unsigned_array
from simindex.index import Index
from simindex.ops.pairs import IdenticalGroup, NearPair

Pair = tuple[int, int]
MB = 2**20


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
    reporting.STARTED = started


class PhaseProgress:
    """Progress of a pairs or clusters run: one line on stderr per part or every few seconds."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.last = time.perf_counter()

    def pairs(self, done: int, total: int) -> None:
        log(f"  {self.label}: {done} of {total} parts")

    def clusters(self, step: str, done: int, total: int | None) -> None:
        now = time.perf_counter()
        if step != "rows" or now - self.last >= REPORT_EVERY_SECONDS:
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
    for survivor in index.survivors("pairs"):
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
    started: float, dsn: str, name: str, threshold: float, num_perm: int
) -> dict[str, Any]:
    """datasketch: a ``MinHashLSH`` with every row inserted, then queried with every row; the
    candidate pairs it returns, and those whose estimated Jaccard reaches ``threshold``.

    Fed the ``num_perm``-value signatures index ``name`` computes from each row's text (its
    table stores band keys and a sketch, not the values), made before the clock starts."""
    _adopt_clock(started)
    from datasketch import MinHash as DatasketchMinHash
    from datasketch import MinHashLSH

    before = max_rss_mb()
    info = Index(dsn, name).info()
    spec, source = info.spec, info.source
    permutations = DatasketchMinHash(num_perm=num_perm, scheme="affine64").permutations
    keys: list[int] = []
    texts: list[str | None] = []
    with psycopg.connect(dsn) as conn:
        for key, text in _side_rows(
            conn,
            sql.SQL("SELECT {}, {} FROM {}.{} ORDER BY 1").format(
                sql.Identifier(source.key_column),
                sql.Identifier(source.text_column),
                sql.Identifier(source.schema),
                sql.Identifier(source.table),
            ),
        ):
            keys.append(int(key))
            texts.append(text)
    values, lengths = spec.hasher.signature_matrix(spec.features(texts))
    present = lengths > 0
    keys = [key for key, keep in zip(keys, present.tolist(), strict=True) if keep]
    begin = time.perf_counter()
    sketches = [
        DatasketchMinHash(scheme="affine64", hashvalues=row, permutations=permutations)
        for row in values[present]
    ]
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
