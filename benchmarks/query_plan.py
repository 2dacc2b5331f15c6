"""What the query benchmark measures and how much of it: constants, targets, sizes."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_ROWS = 1_000_000
QUICK_ROWS = 20_000
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

TARGETS: dict[str, dict[str, float]] = {
    "simhash_1m": {"rows": 1_000_000, "p50_ms": 0.5, "p99_ms": 2.0, "recall": 1.0},
    "simhash_10m": {"rows": 10_000_000, "p50_ms": 1.0, "p99_ms": 5.0, "recall": 1.0},
    "minhash_1m_short": {"rows": 1_000_000, "p50_ms": 2.0},
    "build_1m_short": {"rows": 1_000_000, "seconds": 120.0, "cores": 2},
}


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
