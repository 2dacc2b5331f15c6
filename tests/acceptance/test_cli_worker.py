"""The worker as an operator runs and watches it: log lines, exit codes, stats, metrics."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import urllib.request

import psycopg

from simindex.index import Index
from simindex.ops.queue import failed_items, queue_counts
from tests.acceptance.test_cli import (
    TEXTS,
    TIMEOUT,
    docs,
    environment,
    index,
    insert,
    simindex,
    wait_for,
)

__all__ = ["docs", "index"]  # fixtures, used by name

_SAMPLE = re.compile(r"^(\w+)(?:\{([^}]*)\})? (\S+)$")


def metrics(text: str) -> dict[str, float]:
    """Samples of a Prometheus text exposition: ``name{labels}`` to value."""
    found = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        match = _SAMPLE.match(line)
        assert match, line
        name, labels, value = match.groups()
        found[f"{name}{{{labels}}}" if labels else name] = float(value)
    return found


def test_verbose_logs_a_line_per_batch(database_dsn: str, index: Index) -> None:
    insert(database_dsn, [(10, TEXTS[0]), (11, TEXTS[1]), (12, TEXTS[2])])
    result = simindex("sync", "--verbose", "--batch-size", "2", "--dsn", database_dsn)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 2, result.stderr
    for line, taken in zip(lines, (2, 1), strict=True):
        assert line.startswith(f"simindex: batch index=docs taken={taken} indexed={taken} ")
        assert "removed=0 failed=0 seconds=" in line


def test_json_log_lines(database_dsn: str, index: Index) -> None:
    insert(database_dsn, [(10, "short words here"), (11, "x" * 50)])
    result = simindex(
        "sync", "-v", "--log-format", "json", "--max-text-bytes", "20", "--dsn", database_dsn
    )
    assert result.returncode == 1
    records = [json.loads(line) for line in result.stderr.splitlines()]  # every line is JSON
    assert [record["event"] for record in records] == ["batch", "row_failed", "message"]
    batch, failure, summary = records
    assert summary["level"] == "warning" and summary["message"].startswith("1 row failed (")
    assert (batch["level"], batch["index"], batch["taken"], batch["failed"]) == (
        "info",
        "docs",
        2,
        1,
    )
    assert failure["level"] == "warning" and failure["key"] == "11"  # keys in their text form
    assert "over max_text_bytes=20" in failure["error"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", batch["time"])


def test_a_bad_log_format_is_a_usage_error() -> None:
    result = simindex("sync", "--dsn", "dbname=x", SIMINDEX_LOG_FORMAT="xml")
    assert result.returncode == 2
    assert "--log-format: expected one of text, json, got 'xml'" in result.stderr
    assert simindex("sync", "--log-format", "yaml", "--dsn", "dbname=x").returncode == 2


def test_failed_rows_are_logged_always_and_exit_1(database_dsn: str, index: Index) -> None:
    insert(database_dsn, [(10, "y" * 100)])
    result = simindex("sync", "--max-text-bytes", "20", "--json", SIMINDEX_DSN=database_dsn)
    assert result.returncode == 1
    assert json.loads(result.stdout)["failed"] == 1 and not json.loads(result.stdout)["ok"]
    failure, summary = result.stderr.splitlines()
    assert failure.startswith("simindex: row_failed index=docs key=10 error=")
    assert summary.startswith("simindex: 1 row failed (")
    [(_, error, _, _)] = failed_items(database_dsn, "docs")
    assert "simindex sync --retry-failed --max-text-bytes N" in error  # the CLI's own syntax

    retried = simindex("sync", "--retry-failed", "--dsn", database_dsn)
    assert retried.returncode == 0, retried.stderr
    assert failed_items(database_dsn, "docs") == []


def test_a_broken_index_is_reported_by_sync_and_stats(database_dsn: str, index: Index) -> None:
    insert(database_dsn, [(10, TEXTS[0])])
    with psycopg.connect(database_dsn) as conn:
        # (A rename is followed; a dropped text column is not.)
        conn.execute("ALTER TABLE docs DROP COLUMN body")
    result = simindex("sync", "--dsn", database_dsn)
    assert result.returncode == 1
    broken_line, summary = result.stderr.splitlines()
    assert broken_line.startswith("simindex: index_broken index=docs error=")
    assert "IndexNotReadyError" in broken_line and "attempts=1" in broken_line
    assert "its column public.docs.body was dropped" in broken_line
    assert summary.startswith("simindex: 1 index broken: docs: IndexNotReadyError")

    stats = simindex("stats", "--dsn", database_dsn)
    assert stats.returncode == 0, stats.stderr
    assert "needs_rebuild, BROKEN" in stats.stdout
    assert "docs: BROKEN, last error at " in stats.stdout
    assert "docs is needs_rebuild: its column public.docs.body was dropped" in stats.stdout
    [entry] = json.loads(simindex("stats", "--json", "--dsn", database_dsn).stdout)["indexes"]
    assert entry["broken"] is True and "IndexNotReadyError" in entry["last_error"]
    assert (entry["rows"], entry["queued"]) == (3, 1)


def test_stats_prometheus(database_dsn: str, index: Index) -> None:
    insert(database_dsn, [(10, TEXTS[0]), (11, TEXTS[1])])
    with psycopg.connect(database_dsn) as conn:
        conn.execute("UPDATE simindex.docs_inbox SET queued_at = now() - interval '90 seconds'")
    result = simindex("stats", "--prometheus", "--dsn", database_dsn)
    assert result.returncode == 0, result.stderr
    found = metrics(result.stdout)
    assert found['simindex_index_rows{index="docs"}'] == 3
    assert found['simindex_queue_length{index="docs"}'] == 2
    assert 90 <= found['simindex_queue_lag_seconds{index="docs"}'] < 90 + TIMEOUT
    assert found['simindex_failed_items{index="docs"}'] == 0
    assert found['simindex_index_broken{index="docs"}'] == 0
    assert found['simindex_index_info{index="docs",method="simhash",state="ready"}'] == 1
    assert "# TYPE simindex_queue_lag_seconds gauge" in result.stdout


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_follow_serves_metrics(database_dsn: str, index: Index) -> None:
    port = free_port()
    follower = subprocess.Popen(
        [sys.executable, "-m", "simindex", "sync", "--follow", "--metrics-port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(SIMINDEX_DSN=database_dsn),
    )
    url = f"http://127.0.0.1:{port}/metrics"

    def scrape() -> dict[str, float]:
        with urllib.request.urlopen(url, timeout=5) as response:
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            return metrics(response.read().decode())

    def synced() -> bool:
        try:
            return scrape().get('simindex_sync_rows_indexed_total{index="docs"}') == 1
        except OSError:
            return False  # not listening yet

    try:
        insert(database_dsn, [(10, TEXTS[0])])
        assert wait_for(synced, TIMEOUT), "no metrics of the synced row"
        found = scrape()
        assert found['simindex_index_rows{index="docs"}'] == 4
        assert found['simindex_queue_length{index="docs"}'] == 0
        assert found['simindex_sync_batches_total{index="docs"}'] >= 1
        assert queue_counts(database_dsn, "docs") == (0, 0)
        follower.send_signal(signal.SIGTERM)
        _, stderr = follower.communicate(timeout=TIMEOUT)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.communicate()
    assert follower.returncode == 0, stderr
    assert f"metrics at {url}" in stderr


def test_check_shows_the_broken_mark(database_dsn: str, index: Index) -> None:
    with psycopg.connect(database_dsn) as conn:
        conn.execute(
            "UPDATE simindex.indexes SET (broken, last_error, last_error_at) = "
            "(true, 'InsufficientPrivilege [42501]: permission denied for table docs', now())"
        )
    result = simindex("check", "docs", "--dsn", database_dsn)
    assert result.returncode == 1
    assert "BROKEN: the sync worker's batches fail: InsufficientPrivilege" in result.stdout
    assert "docs is broken: InsufficientPrivilege" in result.stderr
    assert "`simindex sync docs` clears the mark" in result.stderr
    healed = simindex("sync", "--dsn", database_dsn)  # nothing queued: the source is probed
    assert healed.returncode == 0, healed.stderr
    assert "index_recovered index=docs" in healed.stderr
    assert simindex("check", "docs", "--dsn", database_dsn).returncode == 0
