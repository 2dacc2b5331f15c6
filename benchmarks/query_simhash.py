"""simindex SimHash k=3 through SQL and the facade, against an exact numpy truth."""

from __future__ import annotations

import contextlib
import functools
import os
import random
import secrets
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from dataset import Dataset
from numpy.typing import NDArray
from pgserver import (
    BuildProgress,
    Conn,
    Server,
    explain_analyze,
    nested_plans,
    prewarm,
    relation_sizes,
    visibility,
)
from psycopg import sql
from psycopg.conninfo import make_conninfo
from query_facade import (
    facade_parts,
    facade_profile,
    facade_trace,
    key_paths,
    run_near_python,
    sqlalchemy_engine,
)
from query_plan import GENERIC, MAX_DISTANCE, SEED, Plan
from report import latency_ms, log, summary, timed_calls

import simindex
from simindex.core.bits import to_unsigned_array
from simindex.core.design import MankuDesign
from simindex.core.spec import SimHash
from simindex.db.catalog import store_for
from simindex.db.simhash_store import SimHashStore
from simindex.index import Index, create_index
from simindex.ops.build import BuildReport


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
def plan_cache_mode(
    dsn: str, functions: Sequence[sql.Composable], mode: str = "force_generic_plan"
) -> Iterator[None]:
    """The functions' statements planned by ``mode`` (force_generic_plan: one generic plan per
    session; auto: PostgreSQL's choice, a custom plan per call at first), on this throwaway
    database; each function's own setting is restored afterwards."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        before = {}
        for function in functions:
            name = function.as_string(conn)
            row = conn.execute(
                "SELECT coalesce(proconfig, '{}') FROM pg_catalog.pg_proc WHERE oid = %s::regproc",
                (name,),
            ).fetchone()
            config = row[0] if row else []
            before[name] = next(
                (item.split("=", 1)[1] for item in config if item.startswith("plan_cache_mode=")),
                None,
            )
            conn.execute(
                sql.SQL("ALTER FUNCTION {} SET plan_cache_mode = {}").format(
                    function, sql.Literal(mode)
                )
            )
    try:
        yield
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for function in functions:
                kept = before[function.as_string(conn)]
                restore = (
                    sql.SQL("ALTER FUNCTION {} RESET plan_cache_mode").format(function)
                    if kept is None
                    else sql.SQL("ALTER FUNCTION {} SET plan_cache_mode = {}").format(
                        function, sql.Literal(kept)
                    )
                )
                conn.execute(restore)


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


def reader_dsn(dsn: str) -> str:
    """A login role with the reader right and SELECT on the table, as an app's would be: its
    answers go through the source probe (row-level security on the side table), which a
    superuser's skip."""
    password = secrets.token_hex(12)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS simindex_bench_reader")
        conn.execute(
            sql.SQL("CREATE ROLE simindex_bench_reader LOGIN PASSWORD {}").format(
                sql.Literal(password)
            )
        )
        conn.execute("GRANT SELECT ON documents TO simindex_bench_reader")
    simindex.grant(dsn, "simindex_bench_reader", "reader")
    return make_conninfo(dsn, user="simindex_bench_reader", password=password)


def run_reader_sql(
    dsn: str, reader: str, name: str, fingerprints: Sequence[int], keys: Sequence[int]
) -> dict[str, Any]:
    """near_v1 and near_key_v1 (prepared) as the superuser (no probe) and as a reader (one
    primary-key probe of the source per candidate), taking turns query by query."""
    near = near_sql(name)
    by_key = sql.SQL("SELECT key, distance FROM {}(%s)").format(
        sql.Identifier("simindex", f"{name}_near_key_v1")
    )
    result: dict[str, Any] = {}
    with psycopg.connect(dsn, autocommit=True) as owner, psycopg.connect(reader) as ordinary:
        ordinary.autocommit = True
        for label, query, values in (
            ("near_v1", near, [(f, MAX_DISTANCE) for f in fingerprints]),
            ("near_key_v1", by_key, [(k,) for k in keys]),
        ):
            text = query.as_bytes(owner)
            for params in values[:200]:
                owner.execute(text, params, prepare=True).fetchall()
                ordinary.execute(text, params, prepare=True).fetchall()
            seconds: dict[str, list[float]] = {"superuser": [], "reader": []}
            same = 0
            for params in values:
                found = []
                for role, conn in (("superuser", owner), ("reader", ordinary)):
                    begin = time.perf_counter()
                    found.append(conn.execute(text, params, prepare=True).fetchall())
                    seconds[role].append(time.perf_counter() - begin)
                same += found[0] == found[1]
            result[label] = {
                "superuser": latency_ms(seconds["superuser"]),
                "reader": latency_ms(seconds["reader"]),
                "same_answers": f"{same} of {len(values)}",
            }
    return result


def pk_and_functions(
    dsn: str, name: str, fingerprints: Sequence[int], keys: Sequence[int]
) -> dict[str, Any]:
    """A primary-key lookup on the side table beside near_v1(fingerprint) and
    near_key_v1(key), prepared on one connection, taking turns key by key in a shuffled order
    (the issue's target: a query by key at most twice the lookup's round trip)."""
    table = sql.Identifier("simindex", f"{name}_simhash")
    calls = {
        "pk_lookup": sql.SQL("SELECT fingerprint FROM {} WHERE key = %s").format(table),
        "near_v1": near_sql(name),
        "near_key_v1": sql.SQL("SELECT key, distance FROM {}(%s)").format(
            sql.Identifier("simindex", f"{name}_near_key_v1")
        ),
    }
    seconds: dict[str, list[float]] = {label: [] for label in calls}
    order = random.Random(SEED + 2)
    with psycopg.connect(dsn, autocommit=True) as conn:
        texts = list({label: query.as_bytes(conn) for label, query in calls.items()}.items())
        for turn, (fingerprint, key) in enumerate(zip(fingerprints, keys, strict=True)):
            arguments = {
                "pk_lookup": (key,),
                "near_v1": (fingerprint, MAX_DISTANCE),
                "near_key_v1": (key,),
            }
            # A call right after another of the same key finds its pages hot: the order is
            # shuffled every turn, so no call is always first.
            order.shuffle(texts)
            for label, text in texts:
                begin = time.perf_counter()
                conn.execute(text, arguments[label], prepare=True).fetchall()
                if turn >= 200:  # the first 200 keys warm every plan up
                    seconds[label].append(time.perf_counter() - begin)
    latency = {label: latency_ms(values) for label, values in seconds.items()}
    base = latency["pk_lookup"]["p50_ms"]
    return {
        "latency": latency,
        "p50_over_pk_lookup": {
            label: round(latency[label]["p50_ms"] / base, 2) if base else None
            for label in ("near_v1", "near_key_v1")
        },
    }


def _near_call(conn: Conn, query: bytes, fingerprint: int) -> dict[int, int]:
    rows = conn.execute(query, (fingerprint, MAX_DISTANCE), prepare=True).fetchall()
    return {int(key): int(distance) for key, distance in rows}


def scored(store: SimHashStore, fingerprint: sql.Composable, k: sql.Composable) -> sql.Composed:
    """The candidates of ``fingerprint`` (keys and fingerprints) with their distances."""
    return sql.SQL("SELECT c.key, {}(c.fingerprint, {}) FROM ({}) AS c").format(
        sql.Identifier(store.schema, "simhash_distance_v1"),
        fingerprint,
        store.candidates_query(fingerprint, k),
    )


def run_candidates_sql(
    dsn: str, store: SimHashStore, queries: Sequence[int], plan_cache_mode: str = "auto"
) -> tuple[list[float], list[dict[int, int]]]:
    """The function's query sent directly (no plpgsql call): what the function costs."""
    query = sql.SQL("{} ORDER BY 2, 1").format(
        scored(store, sql.SQL("%(fingerprint)s::bigint"), sql.SQL("%(k)s::integer"))
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
    query = sql.SQL("{} ORDER BY 2, 1").format(scored(store, literal, sql.Literal(MAX_DISTANCE)))
    generic = sql.SQL("PREPARE simindex_near_generic(bigint, integer) AS {} ORDER BY 2, 1").format(
        scored(store, sql.SQL("$1"), sql.SQL("$2"))
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
    with plan_cache_mode(dsn, [store.near_function]):
        ((generic_seconds, generic_found),) = run_near_sql(dsn, "docs", queries)
    log("simindex candidates query sent directly")
    raw_seconds, raw_found = run_candidates_sql(dsn, store, queries)
    raw_generic_seconds, raw_generic_found = run_candidates_sql(
        dsn, store, queries, "force_generic_plan"
    )
    log("simindex near and near_key through SQL as a reader (the source probe) and a superuser")
    as_reader = run_reader_sql(dsn, reader_dsn(dsn), "docs", queries, sample_keys)
    log("a primary-key lookup beside near_v1 and near_key_v1, in turn")
    pk_beside = pk_and_functions(dsn, "docs", queries, sample_keys)
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
        profile_query = queries[0]
        profile = facade_profile(lambda: profile_index.near(fingerprint=profile_query), 500)
    finally:
        engine.dispose()
    trace = facade_trace(dsn, lambda i: i.near(fingerprint=queries[0]), "docs")
    parts = facade_parts(dsn, "docs", info.spec)
    log("a query by key on every path: typed and dispatching SQL, facade on each bind")
    by_key = key_paths(dsn, "docs", info.source.key_type, sample_keys, "near")

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
            "results_per_query": spread([len(t) for t in truth]),
        },
        "truth": {
            "method": "numpy XOR + popcount over every fingerprint of the side table",
            "seconds_per_query": round(truth_seconds / len(queries), 5),
            "checked_against_sql_brute_force": compare(brute_found, truth[: len(brute_found)]),
        },
        "sql": {
            "statement": near_sql("docs").as_string(None),
            "latency": latency_ms(sql_seconds),
            "recall": compare(sql_found, truth),
        },
        "sql_session_generic_plan": {
            "setting": "SET plan_cache_mode = force_generic_plan on the connection; timed "
            "query by query in turn with the 'sql' series",
            "latency": latency_ms(session_seconds),
            "recall": compare(session_found, truth),
        },
        "sql_session_generic_plan_no_hashagg": {
            "setting": "plan_cache_mode = force_generic_plan and enable_hashagg = off on the "
            "connection: the generic plan's row estimate (0.5 % of the table per arm) no longer "
            "sizes a HashAggregate; timed in turn with the 'sql' series",
            "latency": latency_ms(sort_seconds),
            "recall": compare(sort_found, truth),
        },
        "sql_function_generic_plan": {
            "setting": "ALTER FUNCTION simindex.docs_near_v1 SET "
            "plan_cache_mode = force_generic_plan, then the same prepared call: plpgsql keeps "
            "one generic plan instead of planning the UNION on every call (proposed fix)",
            "latency": latency_ms(generic_seconds),
            "recall": compare(generic_found, truth),
        },
        "sql_as_reader": {
            "setting": "the same prepared calls as an ordinary role with the reader right and "
            "SELECT on the table (row-level security: one primary-key probe of the source per "
            "candidate) and as the superuser (no probe), query by query in turn",
            **as_reader,
        },
        "pk_lookup_beside_functions": pk_beside,
        "sql_candidates_query_direct": {
            "statement": "store.candidates_query(...) ORDER BY 2, 1, prepared by psycopg",
            "latency": latency_ms(raw_seconds),
            "recall": compare(raw_found, truth),
        },
        "sql_candidates_query_direct_generic_plan": {
            "latency": latency_ms(raw_generic_seconds),
            "recall": compare(raw_generic_found, truth),
        },
        "python": {
            "call": "Index(engine, 'docs').near(fingerprint=...)",
            "engine": "create_engine('postgresql+psycopg://', creator=lambda: "
            "psycopg.connect(dsn)) (QueuePool)",
            "latency": latency_ms(python_seconds),
            "recall": compare(python_found, truth),
            "same_as_sql": sum(p == s for p, s in zip(python_found, sql_found, strict=False)),
            "by_text_latency": latency_ms(text_seconds),
            "per_call_trace": trace,
            "per_call_profile": profile,
            "parts_alone": parts,
        },
        "by_key_paths": by_key,
        "brute_force_sql": {
            "latency": latency_ms(brute_seconds),
            "plan": brute_plan,
        },
        "explain": explain,
        "candidates": candidates,
    }
    return result, fingerprints, sample_keys, truth


def spread(values: Sequence[int]) -> dict[str, Any]:
    """Mean, p50, p99 and max of a count per query (0 for none)."""
    return summary(values or [0], ("mean", "p50", "p99", "max"), digits=2)
