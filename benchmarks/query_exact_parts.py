"""Where the slowest calls of ``Index.similar(key=...)`` with exact verification spend their
time: the statements each sends (wall time in Python around each, the server's share and the
wait for it), and the Python between them, over short texts with template clusters.

    python benchmarks/query_exact_parts.py [--rows N] [--queries N] [--embedded|--local]
                                           [--dsn DSN] [--output PATH]

The corpus, index and keys are ``query_templates.py``'s (``--sample uniform``: any row's key).
Every key is called once on an Engine and timed; then the slowest 1 % are called again, three
times each, with every statement timed where psycopg sends it (``Cursor.execute`` and the
transaction's own commands), and once more under cProfile. ``--dsn`` takes a database where
``query_templates.py``'s table and index (``tmpl``) are built already, to iterate on the code
without a build. Writes ``benchmarks/results/query-exact-parts-<rows>.json``. Not a test:
nothing here asserts a timing, and the machine is shared.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from dedup_templates import template_texts
from pgserver import BuildProgress, add_server_options, benchmark_server, load_table, prewarm
from psycopg import sql
from query_facade import sqlalchemy_engine
from query_plan import SERVER_SETTINGS
from query_templates import NAME, sample_keys
from report import RESULTS, latency_ms, log, new_result, print_table, write_result

import simindex
from simindex.core.spec import MinHash
from simindex.db.catalog import store_for
from simindex.index import Index, create_index

DEFAULT_ROWS = 200_000
DEFAULT_QUERIES = 2_000
WARM = 100
REPEAT = 3


def _label(query: Any, conn: psycopg.Connection[Any]) -> str:
    if isinstance(query, sql.Composable):
        query = query.as_string(conn)
    elif isinstance(query, bytes):
        query = query.decode()
    lines = [line for line in str(query).splitlines() if not line.lstrip().startswith("--")]
    return " ".join(" ".join(lines).split())[:100]


@contextmanager
def statement_times() -> Iterator[dict[str, list[float]]]:
    """Seconds of each statement psycopg sends meanwhile, by the statement's first words."""
    times: dict[str, list[float]] = defaultdict(list)
    execute = psycopg.Cursor.execute
    command = psycopg.Connection._exec_command

    def timed_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        begin = time.perf_counter()
        try:
            return execute(self, query, *args, **kwargs)
        finally:
            times[_label(query, self.connection)].append(time.perf_counter() - begin)

    def timed_command(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        # A generator the connection waits on (BEGIN, COMMIT, SAVEPOINT): timed to its end.
        begin = time.perf_counter()
        result = yield from command(self, query, *args, **kwargs)
        times["(command) " + _label(query, self)].append(time.perf_counter() - begin)
        return result

    setattr(psycopg.Cursor, "execute", timed_execute)  # noqa: B010 (restored below)
    setattr(psycopg.Connection, "_exec_command", timed_command)  # noqa: B010
    try:
        yield times
    finally:
        setattr(psycopg.Cursor, "execute", execute)  # noqa: B010
        setattr(psycopg.Connection, "_exec_command", command)  # noqa: B010


def profile(call: Callable[[], object]) -> list[dict[str, Any]]:
    """The functions taking most of ``call``'s own time (cProfile)."""
    profiler = cProfile.Profile()
    profiler.enable()
    call()
    profiler.disable()
    stats = pstats.Stats(profiler).get_stats_profile()
    functions = sorted(stats.func_profiles.items(), key=lambda item: -item[1].tottime)
    return [
        {
            "function": f"{Path(info.file_name).name}:{info.line_number}:{function}",
            "own_ms": round(info.tottime * 1000, 2),
            "cumulative_ms": round(info.cumtime * 1000, 2),
        }
        for function, info in functions[:20]
    ]


def prepare(dsn: str, rows: int) -> None:
    """``query_templates.py``'s table and index, built, vacuumed and in shared buffers."""
    texts, _ = template_texts(rows)
    with psycopg.connect(dsn, autocommit=True) as conn:
        load_table(conn, "documents", enumerate(texts, 1))
    simindex.migrate(dsn)
    log("MinHash 0.8: create_index + build")
    index = create_index(dsn, NAME, "documents", "body", method=MinHash(0.8))
    index.build(progress=BuildProgress("minhash build"))
    info = index.info()
    store = store_for("simindex", NAME, info.source, info.spec)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(store.table()))
        prewarm(conn, [*store.side_tables(), sql.Identifier("documents")])


def run(dsn: str, rows: int, queries: int) -> dict[str, Any]:
    texts, _ = template_texts(rows)
    keys, members = sample_keys(texts, queries, "uniform")
    engine = sqlalchemy_engine(dsn)
    try:
        index = Index(engine, NAME)
        for key in keys[:WARM]:
            index.similar(key=key)
        calls: list[tuple[float, int, int]] = []
        for key in keys:
            begin = time.perf_counter()
            found = len(index.similar(key=key))
            calls.append((time.perf_counter() - begin, key, found))
        slowest = sorted(calls, reverse=True)[: max(1, len(calls) // 100)]
        log(f"{len(slowest)} slowest calls, {REPEAT} times each, statement by statement")
        total: list[float] = []
        with statement_times() as times:
            for _ in range(REPEAT):
                for _, key, _ in slowest:
                    begin = time.perf_counter()
                    index.similar(key=key)
                    total.append(time.perf_counter() - begin)
        repeated = len(total)
        in_statements = sum(sum(values) for values in times.values())

        def again() -> None:
            for _, key, _ in slowest:
                index.similar(key=key)

        top = profile(again)
    finally:
        engine.dispose()
    return {
        "rows": rows,
        "sample": {"kind": "uniform", "queries": len(keys), "template_members": members},
        "latency": latency_ms([seconds for seconds, _, _ in calls]),
        "slowest": {
            "calls": len(slowest),
            "answers": sorted(found for _, _, found in slowest),
            "ms_per_call": round(sum(total) / repeated * 1000, 3),
            "statements_ms_per_call": round(in_statements / repeated * 1000, 3),
            "python_ms_per_call": round((sum(total) - in_statements) / repeated * 1000, 3),
            "statements": {
                label: {
                    "per_call": round(len(values) / repeated, 2),
                    "ms_per_call": round(sum(values) / repeated * 1000, 3),
                }
                for label, values in sorted(times.items(), key=lambda item: -sum(item[1]))
            },
            "profile_top": top,
        },
    }


def print_report(result: dict[str, Any]) -> None:
    latency = result["latency"]
    slowest = result["slowest"]
    print(
        f"similar(key=) exact, {result['rows']:,} rows: p50 {latency['p50_ms']} ms, "
        f"p99 {latency['p99_ms']} ms; slowest 1 %: {slowest['ms_per_call']} ms a call, "
        f"{slowest['statements_ms_per_call']} in statements, "
        f"{slowest['python_ms_per_call']} in Python between them"
    )
    print_table(
        "statements of the slowest calls",
        ["statement", "per call", "ms a call"],
        [
            [label[:80], value["per_call"], value["ms_per_call"]]
            for label, value in slowest["statements"].items()
        ],
        "lrr",
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=DEFAULT_ROWS)
    parser.add_argument("--queries", type=int, default=DEFAULT_QUERIES)
    parser.add_argument("--dsn", help="a database with the table and index built already")
    parser.add_argument("--output", type=Path)
    add_server_options(parser)
    args = parser.parse_args(argv)
    result = new_result("query_exact_parts", argv)
    if args.dsn:
        result["command"] = result["command"].replace(args.dsn, "DSN")
        with psycopg.connect(args.dsn) as conn:
            result["server_settings"] = {
                name: str(conn.execute("SELECT current_setting(%s)", (name,)).fetchone()[0])  # type: ignore[index]
                for name in [*SERVER_SETTINGS, "fsync"]
            }
            version = str(conn.execute("SELECT version()").fetchone()[0])  # type: ignore[index]
        result |= run(args.dsn, args.rows, args.queries)
    else:
        with benchmark_server(args.server, SERVER_SETTINGS) as server:
            result["server_settings"] = server.settings
            prepare(server.dsn, args.rows)
            result |= run(server.dsn, args.rows, args.queries)
            version = server.version
    output = args.output or RESULTS / f"query-exact-parts-{args.rows}.json"
    write_result(output, result, version)
    print_report(result)
    log(f"wrote {output}")


if __name__ == "__main__":
    main()
