"""What a call through the Python facade costs: latency, protocol trace, profile, parts."""

from __future__ import annotations

import cProfile
import pstats
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg
from pgserver import Conn
from psycopg import sql
from psycopg.pq import Trace
from report import latency_ms, timed_calls
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine

from simindex.core.bits import to_unsigned
from simindex.core.spec import IndexSpec
from simindex.db.statements import statement
from simindex.index import Index


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
        "catalog_get_sql": latency_ms(seconds),
        "spec_from_json_python": latency_ms(parse_seconds),
    }
