"""Synthetic fingerprints with planted neighbours, loaded straight into a side table."""

from __future__ import annotations

import random
import time
from typing import Any

import numpy as np
import psycopg
from numpy.typing import NDArray
from pgserver import Server, prewarm, relation_sizes
from psycopg import sql
from query_facade import run_near_python
from query_plan import GENERIC, MAX_DISTANCE, SEED
from query_simhash import (
    Fingerprints,
    brute_force,
    candidate_counts,
    compare,
    near_explain,
    run_near_sql,
    spread,
)
from report import latency_ms, log, since

from simindex.core.bits import to_signed
from simindex.core.design import MankuDesign
from simindex.core.spec import SimHash
from simindex.db.catalog import store_for
from simindex.db.privileges import back_to_caller, become_owner
from simindex.db.simhash_store import SimHashStore
from simindex.db.statements import run, statement
from simindex.index import Index, create_index


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
        # wal_level=minimal, COPY and CREATE INDEX write no WAL), swapped in at the end, as
        # simindex's owner role (whose tables clusters and sync write).
        run(conn, become_owner())
        store.create(conn, staging=True)
        started = time.perf_counter()
        batch = 500_000
        for start in range(0, rows, batch):
            keys = list(range(start + 1, min(start + batch, rows) + 1))
            store.copy(conn, store.rows(keys, values[start : start + batch]), staging=True)
            if (start // batch) % 4 == 3:
                log(f"  synthetic COPY: {start + batch:,} rows")
        phases["rows_and_copy"] = since(started, rows)
        log("synthetic: creating the prefix indexes")
        started = time.perf_counter()
        store.finish(conn, staging=True)
        phases["create_indexes_and_analyze"] = since(started, rows)
        store.swap_in_staging(conn)
        conn.execute(
            statement("catalog_built", catalog=sql.Identifier("simindex", "indexes")),
            {"name": name, "row_count": rows, "skipped_count": 0},
        )
        run(conn, back_to_caller())
        conn.commit()
        conn.autocommit = True
        started = time.perf_counter()
        conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(store.table()))
        phases["vacuum_analyze"] = since(started, rows)
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
            "results_per_query": spread([len(t) for t in truth]),
        },
        "sql": {"latency": latency_ms(sql_seconds), "recall": compare(sql_found, truth)},
        "sql_session_generic_plan": {
            "latency": latency_ms(session_seconds),
            "recall": compare(session_found, truth),
        },
        "sql_session_generic_plan_no_hashagg": {
            "latency": latency_ms(sort_seconds),
            "recall": compare(sort_found, truth),
        },
        "python": {"latency": latency_ms(python_seconds), "recall": compare(python_found, truth)},
        "brute_force_sql": {
            "latency": latency_ms(brute_seconds),
            "checked_against_numpy": compare(brute_found, truth[: len(brute_found)]),
            "plan": brute_plan,
        },
        "explain": near_explain(dsn, "synth", store, queries[explain_at]),
        "candidates": candidate_counts(info.spec.design, fingerprints, queries),
    }
