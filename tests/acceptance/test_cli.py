"""The ``simindex`` command line, run as users run it: in a subprocess, against a real database."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

import psycopg
import pytest

from simindex.errors import KeyNotIndexedError
from simindex.index import Index, create_index
from simindex.schema import head_revision
from simindex.sync import queue_counts

TEXTS = [
    "the quick brown fox jumps over the lazy dog near the river bank today",
    "a completely different sentence about databases, indexes and fingerprints",
    "postgres keeps the queue durable so a worker that dies loses nothing at all",
]
TIMEOUT = 20


def environment(**values: str) -> dict[str, str]:
    """This process's environment without any database settings, plus ``values``."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in {"SIMINDEX_DSN", "DATABASE_URL", "SIMINDEX_SCHEMA"}
    }
    return env | values


def simindex(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "simindex", *args],
        capture_output=True,
        text=True,
        env=environment(**env),
        timeout=TIMEOUT,
        check=False,
    )


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("simindex: error: ")
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    return lines[0]


def insert(dsn: str, rows: list[tuple[int, str]]) -> None:
    with psycopg.connect(dsn) as conn:
        conn.cursor().executemany("INSERT INTO docs (id, body) VALUES (%s, %s)", rows)


@pytest.fixture
def index(database_dsn: str) -> Index:
    """A built SimHash index of docs.body, three rows in it."""
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE docs (id integer PRIMARY KEY, body text)")
    insert(database_dsn, list(enumerate(TEXTS, start=1)))
    created = create_index(database_dsn, "docs", "docs", "body")
    created.build()
    return created


# -- help and usage


def test_help_names_the_environment_variables() -> None:
    result = simindex("--help")
    assert result.returncode == 0
    for name in ("SIMINDEX_DSN", "DATABASE_URL", "SIMINDEX_SCHEMA"):
        assert name in result.stdout
    sync_help = simindex("sync", "--help")
    assert sync_help.returncode == 0
    assert "--follow" in sync_help.stdout and "SIMINDEX_DSN" in sync_help.stdout


def test_no_database_at_all_is_a_usage_error() -> None:
    result = simindex("migrate")
    assert result.returncode == 2
    line = one_error_line(result)
    assert "--dsn" in line and "SIMINDEX_DSN" in line and "DATABASE_URL" in line


def test_bad_arguments_are_usage_errors() -> None:
    assert simindex("sync", "--batch-size", "0", "--dsn", "dbname=x").returncode == 2
    assert simindex("nosuchcommand").returncode == 2


@pytest.mark.parametrize(
    ("dsn", "expected"),
    [
        ("postgresql://127.0.0.1:1/nothing?connect_timeout=2", "cannot reach the database"),
        ("mysql://localhost/app", "mysql://"),
        ("this is not a dsn", "libpq"),
    ],
)
def test_a_bad_dsn_is_one_line_and_exit_1(dsn: str, expected: str) -> None:
    result = simindex("migrate", "--dsn", dsn)
    assert result.returncode == 1
    assert expected in one_error_line(result)


def test_sync_follow_without_a_server_fails_at_once() -> None:
    result = simindex("sync", "--follow", "--dsn", "postgresql://127.0.0.1:1/nothing")
    assert result.returncode == 1
    assert "cannot reach the database" in one_error_line(result)


# -- migrate


def test_migrate_creates_the_schema_and_is_idempotent(empty_database_dsn: str) -> None:
    first = simindex("migrate", SIMINDEX_DSN=empty_database_dsn)
    assert first.returncode == 0, first.stderr
    assert head_revision() in first.stdout
    again = simindex("--json", "migrate", DATABASE_URL=empty_database_dsn)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["revision"] == head_revision()


def test_migrate_into_another_schema(empty_database_dsn: str) -> None:
    result = simindex("migrate", "--json", SIMINDEX_DSN=empty_database_dsn, SIMINDEX_SCHEMA="si")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"revision": head_revision(), "schema": "si"}
    with psycopg.connect(empty_database_dsn) as conn:
        assert conn.execute("SELECT to_regclass('si.indexes')").fetchone() == ("si.indexes",)


# -- sync


def test_sync_drains_the_queue(database_dsn: str, index: Index) -> None:
    insert(database_dsn, [(10, TEXTS[0]), (11, TEXTS[1])])
    with pytest.raises(KeyNotIndexedError):
        index.near_key(10)
    result = simindex("sync", "--json", "--dsn", database_dsn)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["taken"], report["indexed"], report["removed"], report["failed"]) == (2, 2, 0, 0)
    assert result.stderr == ""  # quiet unless following
    assert [match.key for match in index.near_key(10)] == [1]
    assert [match.key for match in index.near_key(11)] == [2]
    assert queue_counts(database_dsn, "docs") == (0, 0)

    with psycopg.connect(database_dsn) as conn:
        conn.execute("DELETE FROM docs WHERE id = 11")
    text = simindex("sync", "docs", SIMINDEX_DSN=database_dsn)
    assert text.returncode == 0, text.stderr
    assert "0 indexed, 1 removed, 0 failed" in text.stdout


def test_sync_of_an_unknown_index_is_one_line_and_exit_1(database_dsn: str) -> None:
    result = simindex("sync", "nosuchindex", "--dsn", database_dsn)
    assert result.returncode == 1
    assert "nosuchindex" in one_error_line(result)


def test_sync_before_migrate_says_so(empty_database_dsn: str) -> None:
    result = simindex("sync", "--dsn", empty_database_dsn)
    assert result.returncode == 1
    assert "simindex migrate" in one_error_line(result)


def wait_for(condition: Any, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def test_sync_follow_picks_up_changes_and_stops_cleanly_on_sigterm(
    database_dsn: str, index: Index
) -> None:
    follower = subprocess.Popen(
        [sys.executable, "-m", "simindex", "sync", "docs", "--follow", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(SIMINDEX_DSN=database_dsn),
    )
    try:
        insert(database_dsn, [(20, TEXTS[2])])

        def indexed() -> bool:
            try:
                return [match.key for match in index.near_key(20)] == [3]
            except KeyNotIndexedError:
                return False

        assert wait_for(indexed, 10), "the follower did not index the new row"
        follower.send_signal(signal.SIGTERM)
        stdout, stderr = follower.communicate(timeout=TIMEOUT)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.communicate()
    assert follower.returncode == 0, stderr
    report = json.loads(stdout)
    assert report["indexed"] == 1 and report["failed"] == 0
    assert "following docs" in stderr
