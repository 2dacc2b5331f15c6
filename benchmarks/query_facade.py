"""What a call through the Python facade costs: latency, protocol trace, profile, parts.

    python benchmarks/query_facade.py [--rows N] [--keys K] [--texts T] [--embedded|--local]
                                      [--baseline TREE]

Run alone, it measures each layer of a query by key and by text over ``--rows`` documents
(150,000 by default, at most 200,000: the machine is shared; the overheads are per call, not
per row) with a SimHash and a MinHash index, the layers taking turns query by query: the
typed SQL function prepared on a psycopg connection (the floor), by key the facade's own
statement (``facade_by_key``) on that connection, ``Index`` on a caller's Engine, on a DSN
string and in a caller's Connection, and the SQLAlchemy selectable; p50/p99 and the p50 over
the floor (target: ``Index`` by key within 0.10 ms on an Engine and on a DSN), what one call
sends (libpq's trace) and where it spends its time (cProfile).
With ``--baseline TREE`` (another checkout of simindex), ``index_engine BEFORE`` and
``index_dsn BEFORE`` take their turns by key too: the same calls in a child process with that
tree first on ``sys.path``, timed there (the pipe to it is not counted).
Writes ``benchmarks/results/query-facade.json``. Its helpers also serve ``query.py``.
"""

from __future__ import annotations

import cProfile
import json
import os
import pstats
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import psycopg
from pgserver import Conn
from psycopg import sql
from psycopg.pq import Trace
from report import latency_ms, timed_calls
from sqlalchemy import BigInteger, create_engine, select
from sqlalchemy.engine import Engine

import simindex.sqlalchemy as sa_query
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


# --- The layers of one query, side by side (python benchmarks/query_facade.py) ---------------

LAYER_TARGET_MS = 0.10
"""Issue 22: Python by key at most the typed SQL function + 0.10 ms p50 (Engine and DSN)."""
FACES = ("index_engine", "index_dsn")


class Timed(NamedTuple):
    """A call timed by the process that made it: wall and CPU seconds."""

    seconds: float
    cpu: float


class Baseline:
    """``near_key`` or ``similar(key=..., verify="estimate")`` on an Engine and on a DSN, by a
    child process whose simindex is another tree's (``--serve``)."""

    def __init__(self, tree: Path, dsn: str, name: str, method: str) -> None:
        path = os.pathsep.join([str(tree), str(Path(__file__).parent)])
        self.child = subprocess.Popen(
            [sys.executable, str(Path(__file__)), "--serve", dsn, name, method],
            env=os.environ | {"PYTHONPATH": path},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def call(self, how: str) -> Callable[[Any], Timed]:
        def timed(key: Any) -> Timed:
            assert self.child.stdin is not None and self.child.stdout is not None
            self.child.stdin.write(f"{how} {key}\n")
            self.child.stdin.flush()
            return Timed(*json.loads(self.child.stdout.readline()))

        return timed

    def close(self) -> None:
        assert self.child.stdin is not None
        self.child.stdin.close()
        self.child.wait()


def serve(dsn: str, name: str, method: str) -> None:
    """The child of :class:`Baseline`: reads ``how key`` lines, answers ``[seconds, cpu]``."""
    engine = sqlalchemy_engine(dsn)
    indexes = {"engine": Index(engine, name), "dsn": Index(dsn, name)}
    for line in sys.stdin:
        how, key = line.split()
        index = indexes[how]
        begin, begin_cpu = time.perf_counter(), time.process_time()
        if method == "simhash":
            index.near_key(int(key))
        else:
            index.similar(key=int(key), verify="estimate")
        took = [time.perf_counter() - begin, time.process_time() - begin_cpu]
        print(json.dumps(took), flush=True)
    engine.dispose()


def _interleaved(
    paths: dict[str, Callable[[Any], object]],
    items: Sequence[Any],
    warm: int,
    commit: Callable[[], None],
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Each item through every path, the paths' order shuffled per item (a noisy moment of
    the machine hits all alike); the first ``warm`` items untimed."""
    seconds: dict[str, list[float]] = {path: [] for path in paths}
    cpu: dict[str, float] = dict.fromkeys(paths, 0.0)
    order = list(paths.items())
    shuffler = random.Random(7)
    for turn, item in enumerate([*items[:warm], *items]):
        shuffler.shuffle(order)
        for path, call in order:
            begin, begin_cpu = time.perf_counter(), time.process_time()
            found = call(item)
            took = Timed(time.perf_counter() - begin, time.process_time() - begin_cpu)
            if turn >= warm:
                took = found if isinstance(found, Timed) else took
                seconds[path].append(took.seconds)
                cpu[path] += took.cpu
        if turn % 100 == 99:
            commit()  # a caller's transaction is not held for ever
    # The client's own CPU time a call (this process's, not the server's): what the Python
    # layers cost whatever the machine's load does to the wall clock.
    return seconds, {path: total / len(items) for path, total in cpu.items()}


def _summary(
    measured: tuple[dict[str, list[float]], dict[str, float]], floor: str
) -> dict[str, Any]:
    seconds, client_cpu = measured
    latencies = {path: latency_ms(values) for path, values in seconds.items()}
    base = latencies[floor]
    # Each query's own difference from the floor in the same turn, then their median: a load
    # that comes and goes moves both sides of a difference alike (the p50s' difference below
    # compares two medians, which a busy minute for one path and not the other can shift).
    paired = {
        path: round(
            statistics.median(
                (mine - theirs) * 1000 for mine, theirs in zip(values, seconds[floor], strict=True)
            ),
            4,
        )
        for path, values in seconds.items()
    }
    return {
        "latency": latencies,
        "paired_p50_over_floor_ms": paired,
        "client_cpu_ms_per_call": {
            path: round(value * 1000, 4) for path, value in client_cpu.items()
        },
        "client_cpu_over_floor_ms": {
            path: round((value - client_cpu[floor]) * 1000, 4) for path, value in client_cpu.items()
        },
        "p50_over_floor_ms": {
            path: round(latency["p50_ms"] - base["p50_ms"], 4)
            for path, latency in latencies.items()
        },
        "p99_over_floor_ms": {
            path: round(latency["p99_ms"] - base["p99_ms"], 4)
            for path, latency in latencies.items()
        },
        "floor": floor,
    }


def layers(
    dsn: str,
    name: str,
    keys: Sequence[int],
    texts: Sequence[str],
    method: str,
    baseline: Path | None = None,
) -> dict[str, Any]:
    """A query by key and by text through every layer, interleaved key by key: the typed SQL
    function prepared on a psycopg connection in autocommit (the floor), ``Index`` on an
    Engine, on a DSN string and in a caller's Connection, and the SQLAlchemy selectable
    (built per call without a bind, run in a caller's Connection)."""
    simhash = method == "simhash"
    engine = sqlalchemy_engine(dsn)
    info = Index(dsn, name).info()
    with psycopg.connect(dsn, autocommit=True) as conn, engine.connect() as connection:
        measure = "distance" if simhash else "similarity"
        kind = "near" if simhash else "similar"
        by_key_sql = (
            sql.SQL("SELECT key, {} FROM {}(%s, max_rows => NULL)")  # every row, as Index asks
            .format(sql.Identifier(measure), sql.Identifier("simindex", f"{name}_{kind}_key_v1"))
            .as_bytes(conn)
        )
        if simhash:
            by_text_sql = (
                sql.SQL("SELECT key, distance FROM {}(%s, max_rows => NULL)")
                .format(sql.Identifier("simindex", f"{name}_near_v1"))
                .as_bytes(conn)
            )
        else:
            by_text_sql = (
                sql.SQL(
                    "SELECT key, similarity FROM {}(%s::bit varying, %s, max_rows => NULL, "
                    "set_hash => %s)"
                )
                .format(sql.Identifier("simindex", f"{name}_similar_v1"))
                .as_bytes(conn)
            )
        indexes = {
            "engine": Index(engine, name),
            "dsn": Index(dsn, name),
            "connection": Index(connection, name),
        }
        fingerprinter = indexes["dsn"]
        fingerprinter.near_key(keys[0]) if simhash else fingerprinter.similar(
            key=keys[0], verify="estimate"
        )
        kept = fingerprinter._kept.entry  # the spec as the Index fingerprints with it
        kept_info = info if kept is None else kept.info

        def arguments(text: str) -> tuple[Any, ...]:
            from simindex.index import SimilarArguments, _function_arguments

            found = _function_arguments(kept_info, text)
            if isinstance(found, SimilarArguments):
                return (found.sketch, list(found.band_keys), found.set_hash)
            return (found,)

        def key_call(index: Index) -> Callable[[Any], object]:
            if simhash:
                return index.near_key
            return lambda key: index.similar(key=key, verify="estimate")

        def text_call(index: Index) -> Callable[[Any], object]:
            if simhash:
                return index.near
            return lambda text: index.similar(text, verify="estimate")

        def selectable_by_key(key: int) -> object:
            if simhash:
                found = sa_query.near_key(None, name, key, key_type=BigInteger())
                measured = found.c.distance
            else:
                found = sa_query.similar_key(None, name, key, key_type=BigInteger())
                measured = found.c.similarity
            return connection.execute(select(found.c.key, measured)).all()

        def selectable_by_text(text: str) -> object:
            found = (
                sa_query.near(connection, name, text)
                if simhash
                else sa_query.similar(connection, name, text)
            )
            return connection.execute(select(found.c.key, found.c[measure])).all()

        facade_sql = fingerprinter._kept.by_key_statement(conn, kept)  # type: ignore[arg-type]
        bound = getattr(kept_info.spec.method, "max_distance" if simhash else "threshold")
        facade_cursor = conn.cursor()
        key_paths_: dict[str, Callable[[Any], object]] = {
            "sql_typed": lambda key: conn.execute(by_key_sql, (key,), prepare=True).fetchall(),
            "sql_facade_statement": lambda key: facade_cursor.execute(
                facade_sql, {"name": name, "limit": None, "bound": bound, "key": key}, prepare=True
            ).fetchall(),
            **{f"index_{how}": key_call(index) for how, index in indexes.items()},
            "sqlalchemy_selectable": selectable_by_key,
        }
        before = None if baseline is None else Baseline(baseline, dsn, name, method)
        if before is not None:
            key_paths_ |= {f"index_{how} BEFORE": before.call(how) for how in ("engine", "dsn")}
        given = {text: arguments(text) for text in texts}
        text_paths: dict[str, Callable[[Any], object]] = {
            "sql_typed_fingerprint_given": lambda text: conn.execute(
                by_text_sql, given[text], prepare=True
            ).fetchall(),
            "sql_typed_fingerprinted_here": lambda text: conn.execute(
                by_text_sql, arguments(text), prepare=True
            ).fetchall(),
            **{f"index_{how}": text_call(index) for how, index in indexes.items()},
            "sqlalchemy_selectable": selectable_by_text,
        }
        fingerprinter.info()
        answers = [len(conn.execute(by_key_sql, (key,)).fetchall()) for key in keys]
        by_key = _interleaved(key_paths_, keys, 100, connection.commit)
        if before is not None:
            before.close()
        by_text = _interleaved(text_paths, texts, 50, connection.commit)
        connection.commit()
        profiles = {
            f"index_{how}_by_key": facade_profile(
                (lambda call: lambda: call(keys[0]))(key_call(index)), 300
            )
            for how, index in indexes.items()
            if how != "connection"
        }
        connection.commit()
    engine.dispose()
    key_summary = _summary(by_key, "sql_typed")
    over = key_summary["p50_over_floor_ms"]
    paired = key_summary["paired_p50_over_floor_ms"]
    return {
        "keys": len(keys),
        "texts": len(texts),
        "by_key": {
            **key_summary,
            "rows_per_answer": {
                "mean": round(sum(answers) / len(answers), 1),
                "max": max(answers),
                "p50": sorted(answers)[len(answers) // 2],
            },
            "round_trips": "Engine and DSN: 1 (facade_by_key); Connection: 2 (the entry's "
            "check, then the query, in the caller's transaction); SQLAlchemy selectable: 1",
            "target_p50_over_floor_ms": LAYER_TARGET_MS,
            "target_met_paired": {path: paired[path] <= LAYER_TARGET_MS for path in FACES},
            "target_met_p50s": {path: over[path] <= LAYER_TARGET_MS for path in FACES},
        },
        "by_text": _summary(by_text, "sql_typed_fingerprinted_here"),
        "traces": {
            "index_engine_by_key": facade_trace(dsn, lambda index: key_call(index)(keys[0]), name),
        },
        "profiles": profiles,
    }


def main(argv: Sequence[str] | None = None) -> None:
    import argparse
    import os

    from dataset import make_dataset
    from pgserver import add_server_options, benchmark_server, load_table, prewarm
    from query_plan import SERVER_SETTINGS
    from report import baseline_label, log, new_result, write_result

    import simindex
    from simindex.core.spec import MinHash, SimHash
    from simindex.db.catalog import store_of
    from simindex.index import create_index

    parser = argparse.ArgumentParser(description=__doc__)
    add_server_options(parser)
    parser.add_argument("--rows", type=int, default=150_000)
    parser.add_argument("--keys", type=int, default=2000)
    parser.add_argument("--texts", type=int, default=500)
    parser.add_argument(
        "--output", type=Path, default=Path(__file__).parent / "results" / "query-facade.json"
    )
    parser.add_argument(
        "--baseline", type=Path, help="another simindex tree, measured beside (as BEFORE)"
    )
    parser.add_argument("--serve", nargs=3, help=argparse.SUPPRESS)  # Baseline's child
    args = parser.parse_args(argv)
    if args.serve:
        serve(*args.serve)
        return
    if args.rows > 200_000:
        raise SystemExit("at most 200k rows: the machine is shared (1M is for a quiet one)")
    report = new_result("query_facade", argv)
    if args.baseline:  # no machine path in a result
        report["command"] = report["command"].replace(str(args.baseline), "BEFORE")
        report["baseline"] = baseline_label(args.baseline)
    report["scale_note"] = (
        f"{args.rows:,} rows, not 1M: measured on a machine shared by several engineers "
        "(2 cores, loaded); the overheads are per call and do not grow with the table"
    )
    with benchmark_server(args.server, {**SERVER_SETTINGS, "shared_buffers": "512MB"}) as server:
        dsn = server.dsn
        simindex.migrate(dsn)
        log(f"data: {args.rows:,} documents")
        dataset = make_dataset(args.rows, None)
        with psycopg.connect(dsn, autocommit=True) as conn:
            report["data"] = load_table(conn, "documents", enumerate(dataset.texts, start=1))
        create_index(dsn, "docs", "documents", "body", method=SimHash(max_distance=3)).build()
        create_index(dsn, "mh", "documents", "body", method=MinHash(threshold=0.8)).build()
        with psycopg.connect(dsn, autocommit=True) as conn:
            for name in ("docs", "mh"):
                prewarm(conn, store_of(Index(dsn, name).info()).side_tables())
            prewarm(conn, [sql.Identifier("documents")])
        chooser = random.Random(11)
        planted = [p.copy for p in dataset.planted]
        keys = chooser.sample(planted, min(len(planted), args.keys // 4))
        keys += chooser.sample(range(1, args.rows + 1), args.keys - len(keys))
        texts = [dataset.texts[key - 1] for key in chooser.sample(keys, args.texts)]
        report["simhash"] = layers(dsn, "docs", keys, texts, "simhash", args.baseline)
        log("SimHash done")
        report["minhash"] = layers(dsn, "mh", keys, texts, "minhash", args.baseline)
        report["server"] = {"kind": server.kind, "version": server.version}
    report["cpu_count"] = os.cpu_count()
    write_result(args.output, report, server.version)
    for method in ("simhash", "minhash"):
        for part in ("by_key", "by_text"):
            found = report[method][part]
            print(f"\n{method} {part} (floor: {found['floor']})")
            for path, latency in found["latency"].items():
                print(
                    f"  {path:32s} p50 {latency['p50_ms']:7.3f} ms  p99 {latency['p99_ms']:7.3f} ms"
                    f"  {found['p50_over_floor_ms'][path]:+.3f} ms p50"
                    f"  {found['paired_p50_over_floor_ms'][path]:+.3f} ms paired"
                    f"  client CPU {found['client_cpu_ms_per_call'][path]:.3f} ms"
                )
    print(f"\nwritten: {args.output}")


if __name__ == "__main__":
    main()
