"""The peers on the same rows: pg_trgm's ``%`` and pgvector's HNSW over bit(64)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
from dataset import Dataset
from pgserver import Conn, Server, explain_analyze, prewarm, scalar
from psycopg import sql
from query_plan import HNSW_LIMIT, MAX_DISTANCE, TRGM_THRESHOLD, Plan
from query_simhash import Fingerprints, compare
from report import latency_ms, log, timed_calls


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
        "latency": latency_ms(seconds),
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
        "latency": latency_ms(seconds),
        "recall_vs_brute_force": recall,
        "recall_at_10": round(recall["found"] / capped, 6) if capped else None,
        "queries_with_more_than_10_true_neighbours": sum(len(t) > HNSW_LIMIT for t in expected),
        "bounded": f"{plan.hnsw_budget_seconds:.0f} s of queries at most",
        "explain": explain,
    }
