"""What a call through the Python facade costs: latency, protocol trace, profile, parts."""

from __future__ import annotations

import cProfile
import pstats
import random
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
        found = index.near(fingerprint=fingerprint)
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
        query = statement(
            "catalog_get",
            catalog=catalog,
            drift=sql.Identifier("simindex", "drift_v1"),
            lock=sql.SQL(""),
        ).as_bytes(conn)
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


def key_paths(dsn: str, name: str, key_type: str, keys: Sequence[int], method: str) -> Any:
    """A query by key on every path, side by side: the index's typed SQL function, the
    dispatching one (``near_key_v1``/``similar_key_v1``), and ``Index.near_key`` (or
    ``similar(key=...)``) on an Engine, on a Connection and on a DSN string. The paths take
    turns key by key, so a noisy moment of the machine hits all alike. Overheads are p50
    differences from the typed function (targets: dispatch +0.05 ms, facade +0.15 ms). The
    order of the paths is shuffled for every key."""
    measure = "distance" if method == "near" else "similarity"
    typed = sql.SQL("SELECT key, {} FROM {}(%s)").format(
        sql.Identifier(measure), sql.Identifier("simindex", f"{name}_{method}_key_v1")
    )
    dispatch = sql.SQL("SELECT key, {} FROM {}(%s, %s::{})").format(
        sql.Identifier(measure),
        sql.Identifier("simindex", f"{method}_key_v1"),
        sql.SQL(key_type),
    )
    engine = sqlalchemy_engine(dsn)
    with (
        psycopg.connect(dsn, autocommit=True) as conn,
        engine.connect() as connection,
    ):
        typed_text, dispatch_text = typed.as_bytes(conn), dispatch.as_bytes(conn)
        by_engine, by_connection, by_dsn = (
            Index(engine, name),
            Index(connection, name),
            Index(dsn, name),
        )

        def facade(index: Index) -> Callable[[int], object]:
            if method == "near":
                return index.near_key
            return lambda key: index.similar(key=key)

        paths: dict[str, Callable[[int], object]] = {
            "sql_typed": lambda key: conn.execute(typed_text, (key,), prepare=True).fetchall(),
            "sql_dispatch": lambda key: conn.execute(
                dispatch_text, (name, key), prepare=True
            ).fetchall(),
            "python_engine": facade(by_engine),
            "python_connection": facade(by_connection),
            "python_dsn": facade(by_dsn),
        }
        seconds: dict[str, list[float]] = {path: [] for path in paths}
        order = list(paths.items())
        shuffler = random.Random(1)
        for turn, key in enumerate([*keys[:100], *keys]):
            shuffler.shuffle(order)  # no path always runs first, or right after the SQL ones
            for path, call in order:
                begin = time.perf_counter()
                call(key)
                if turn >= 100:  # the first 100 keys warm every path up
                    seconds[path].append(time.perf_counter() - begin)
            if turn % 100 == 99:
                connection.commit()  # a caller's transaction is not held for ever
    engine.dispose()
    latencies = {path: latency_ms(values) for path, values in seconds.items()}
    base = latencies["sql_typed"]["p50_ms"]
    return {
        "keys": len(keys),
        "latency": latencies,
        "p50_over_typed_ms": {
            path: round(latency["p50_ms"] - base, 4)
            for path, latency in latencies.items()
            if path != "sql_typed"
        },
        "targets_ms": {"sql_dispatch": 0.05, "python_engine": 0.15},
    }
