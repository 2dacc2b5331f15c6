"""A throwaway PostgreSQL tuned for a benchmark, and what the benchmarks ask of it."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, LiteralString

import psycopg
from psycopg import sql
from report import log

from simindex.embedded import (
    apply_settings,
    embedded_bindir,
    embedded_postgres,
    find_local_bindir,
    local_postgres,
)

Conn = psycopg.Connection[tuple[Any, ...]]
Query = LiteralString | sql.SQL | sql.Composed
REPORTED_SETTINGS = ("fsync", "full_page_writes", "autovacuum")
REPORT_EVERY_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class Server:
    dsn: str
    kind: str
    version: str
    version_num: int
    settings: dict[str, str]
    extensions: dict[str, str]


def add_server_options(
    parser: argparse.ArgumentParser, default: str = "embedded", embedded: str = "PostgreSQL 18"
) -> None:
    """``--embedded`` or ``--local``: which PostgreSQL a benchmark starts (``args.server``)."""
    source = parser.add_mutually_exclusive_group()
    for kind, what in (
        ("embedded", f"embedded-postgres ({embedded})"),
        ("local", "this machine's PostgreSQL binaries"),
    ):
        shown = " [default]" if kind == default else ""
        source.add_argument(
            f"--{kind}", dest="server", action="store_const", const=kind, help=what + shown
        )
    parser.set_defaults(server=default)


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
