"""The ``simindex`` command line, run as users run it: in a subprocess, against a real database."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from simindex.db.schema import head_revision
from simindex.errors import IndexNotFoundError, KeyNotIndexedError
from simindex.index import Index, create_index, get_index, list_indexes
from simindex.ops.queue import queue_counts
from tests.commands import run_simindex

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


def simindex(*args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    result = run_simindex(args, stdin=stdin, env=environment(**env), timeout=TIMEOUT)
    # The tests run as a superuser, which sync and build warn about (tests/security runs
    # them as ordinary roles); the rest of stderr is what these tests check.
    result.stderr = "".join(
        line for line in result.stderr.splitlines(keepends=True) if SUPERUSER_WARNING not in line
    )
    return result


SUPERUSER_WARNING = "runs as a superuser"


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
def docs(database_dsn: str) -> str:
    """A table docs (id integer, body text) with the three TEXTS as rows 1 to 3; its DSN."""
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE docs (id integer PRIMARY KEY, body text)")
    insert(database_dsn, list(enumerate(TEXTS, start=1)))
    return database_dsn


@pytest.fixture
def index(docs: str) -> Index:
    """A built SimHash index of docs.body, three rows in it."""
    created = create_index(docs, "docs", "docs", "body")
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
    create_help = simindex("create", "--help")
    assert create_help.returncode == 0
    for option in ("--max-distance", "--threshold", "--num-perm", "--scheme", "--shingle-size"):
        assert option in create_help.stdout
    assert "SIMINDEX_DSN" in create_help.stdout


HEAVY = ("numpy", "psycopg", "sqlalchemy", "importlib.metadata")


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["stats", "-h"], ["query", "--help"]])
def test_help_and_version_load_nothing_heavy(argv: list[str]) -> None:
    """``--help`` and ``--version`` answer at once: the maths, the drivers and the package
    metadata load only when a command needs them (each costs a tenth of a second or more)."""
    code = (
        "import sys\n"
        "from simindex.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    assert result.stdout
    assert result.stderr.strip() == ""


def test_stats_loads_no_sqlalchemy(index: Index, docs: str) -> None:
    """``simindex stats`` on a libpq DSN connects with psycopg alone: SQLAlchemy's import (a
    quarter of a second of CPU) is not paid by a command that makes one transaction (issue 19,
    item 3); a ``postgresql+psycopg://`` URL, SQLAlchemy's own, still goes through it."""
    code = (
        "import sys\n"
        "from simindex.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "print(code, 'sqlalchemy' in sys.modules, file=sys.stderr)"
    )
    parts = conninfo_to_dict(docs)
    query = urllib.parse.urlencode([(k, str(parts[k])) for k in ("host", "port") if k in parts])
    url = f"postgresql+psycopg://{parts['user']}@/{parts['dbname']}?{query}"
    for dsn, loaded in ((docs, False), (url, True)):
        result = subprocess.run(
            [sys.executable, "-c", code, "stats", "--json"],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
            env=environment(SIMINDEX_DSN=dsn),
        )
        assert json.loads(result.stdout)["indexes"][0]["rows"] == 3, result.stderr
        assert result.stderr.splitlines()[-1] == f"0 {loaded}"


def test_sync_help_still_shows_the_worker_defaults() -> None:
    from simindex.ops.batch import DEFAULT_MAX_TEXT_BYTES
    from simindex.ops.sync import DEFAULT_BATCH_SIZE, DEFAULT_CONNECTIONS

    shown = " ".join(simindex("sync", "--help").stdout.split())
    assert f"queue entries per transaction (default: {DEFAULT_BATCH_SIZE})" in shown
    assert f"(default: {DEFAULT_CONNECTIONS})" in shown
    assert f"instead of being read (default: {DEFAULT_MAX_TEXT_BYTES})" in shown
    assert "(default: 3)" in " ".join(simindex("create", "--help").stdout.split())


def test_no_database_at_all_is_a_usage_error() -> None:
    result = simindex("migrate")
    assert result.returncode == 2
    line = one_error_line(result)
    assert "--dsn" in line and "SIMINDEX_DSN" in line and "DATABASE_URL" in line


@pytest.mark.parametrize(
    ("argv", "command", "typed"),
    [
        (["stats", "--x"], "stats", "--x"),
        (["--x", "stats"], "stats", "--x"),
        (["query", "docs", "--limit", "3", "text", "more"], "query", "more"),
        (["sync", "--dns=postgresql://app:s3cret@db/app"], "sync", "--dns=postgresql://app:***@"),
    ],
)
def test_an_unknown_option_is_one_line_that_says_where_the_options_are(
    argv: list[str], command: str, typed: str
) -> None:
    """Not the usage of the main parser or of the command (issue 19, item 12): the option as
    typed (a password in it hidden) and the command whose help lists the right ones."""
    result = simindex(*argv)
    assert result.returncode == 2
    line = one_error_line(result)
    assert line.startswith(f"simindex: error: unrecognized arguments: {typed}")
    assert f"`simindex {command} --help`" in line
    assert "s3cret" not in line


def test_bad_arguments_are_usage_errors() -> None:
    assert simindex("sync", "--batch-size", "0", "--dsn", "dbname=x").returncode == 2
    assert simindex("sync", "--connections", "0", "--dsn", "dbname=x").returncode == 2
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
    result = simindex(
        "sync", "--json", "--batch-size", "1", "--connections", "3", "--dsn", database_dsn
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["taken"], report["indexed"], report["removed"], report["failed"]) == (2, 2, 0, 0)
    assert result.stderr == ""  # quiet unless following
    assert [match.key for match in index.near_key(10)] == [1]
    assert [match.key for match in index.near_key(11)] == [2]
    assert queue_counts(database_dsn, "docs") == (0, 0)

    with psycopg.connect(database_dsn) as conn:
        conn.execute("UPDATE docs SET body = %s WHERE id = 11", (TEXTS[2],))
    text = simindex("sync", "docs", SIMINDEX_DSN=database_dsn)
    assert text.returncode == 0, text.stderr
    assert "1 indexed, 0 removed, 0 failed" in text.stdout


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


def scalar(dsn: str, query: str) -> Any:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None
    return row[0]


ONE_BY_TEN = ["--connections", "1", "--batch-size", "10"]


def test_sync_follow_on_sigint_finishes_the_batch_and_exits_0(
    database_dsn: str, index: Index
) -> None:
    with psycopg.connect(database_dsn) as conn:
        conn.execute(
            "INSERT INTO docs SELECT g, 'queued text ' || g FROM generate_series(101, 300) g"
        )
        # Each batch's write sleeps inside the server: the signal comes in the middle of one.
        conn.execute(
            "CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN PERFORM pg_sleep(0.3); RETURN NULL; END $$"
        )
        conn.execute(
            "CREATE TRIGGER slow AFTER INSERT OR UPDATE ON simindex.docs_simhash "
            "FOR EACH STATEMENT EXECUTE FUNCTION slow()"
        )
    sleeping = (
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE wait_event = 'PgSleep' AND datname = current_database()"
    )
    follower = subprocess.Popen(
        [sys.executable, "-m", "simindex", "sync", "docs", "--follow", "--json", *ONE_BY_TEN],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(SIMINDEX_DSN=database_dsn),
    )
    try:
        assert wait_for(lambda: queue_counts(database_dsn, "docs")[0] < 200, 20)
        assert wait_for(lambda: scalar(database_dsn, sleeping) > 0, 10)
        before = queue_counts(database_dsn, "docs")[0]
        follower.send_signal(signal.SIGINT)
        stdout, stderr = follower.communicate(timeout=TIMEOUT)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.communicate()
    assert follower.returncode == 0, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    report = json.loads(stdout)
    left = queue_counts(database_dsn, "docs")[0]
    # The batch in flight was committed whole, and no other started (unless the signal came
    # just as one began: a batch takes 0.3 s, the measurement a few milliseconds).
    assert before - left in (10, 20)
    assert report["taken"] == report["indexed"] == 200 - left and report["failed"] == 0
    indexed = scalar(database_dsn, "SELECT count(*) FROM simindex.docs_simhash WHERE key > 100")
    assert indexed == 200 - left


def test_one_shot_sync_stopped_by_sigint_says_what_is_left_and_exits_130(
    database_dsn: str, index: Index
) -> None:
    with psycopg.connect(database_dsn) as conn:
        conn.execute(
            "INSERT INTO docs SELECT g, 'queued text ' || g FROM generate_series(101, 300) g"
        )
        conn.execute(
            "CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN PERFORM pg_sleep(0.3); RETURN NULL; END $$"
        )
        conn.execute(
            "CREATE TRIGGER slow AFTER INSERT OR UPDATE ON simindex.docs_simhash "
            "FOR EACH STATEMENT EXECUTE FUNCTION slow()"
        )
    worker = subprocess.Popen(
        [sys.executable, "-m", "simindex", "sync", "docs", *ONE_BY_TEN],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(SIMINDEX_DSN=database_dsn),
    )
    try:
        assert wait_for(lambda: queue_counts(database_dsn, "docs")[0] < 200, 20)
        worker.send_signal(signal.SIGINT)
        _, stderr = worker.communicate(timeout=TIMEOUT)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate()
    left = queue_counts(database_dsn, "docs")[0]
    assert 0 < left < 200
    assert worker.returncode == 130, stderr
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if SUPERUSER_WARNING not in line]
    assert lines == [
        f"simindex: interrupted: sync stopped after its current batch; keys still queued "
        f"(docs: {left:,}); run `simindex sync` again to finish"
    ]


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_build_interrupted_says_it_was_rolled_back(database_dsn: str, index: Index) -> None:
    with psycopg.connect(database_dsn) as conn:
        conn.execute("ALTER TABLE docs DISABLE TRIGGER USER")  # no queue: only build writes
        conn.execute(
            "INSERT INTO docs SELECT g, repeat('some words of text ' || g, 50) "
            "FROM generate_series(101, 60000) g"
        )
    # A reader's transaction holds the index's table, so the build, its rows written, waits
    # at its swap (retrying its lock; see _lock_for_swap) until the signal: the signal always
    # comes before the build could commit, however fast or loaded the machine.
    holder = psycopg.connect(database_dsn)
    holder.execute("SELECT count(*) FROM simindex.docs_simhash")
    holder_pid = holder.info.backend_pid
    at_swap = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        f"AND pid NOT IN (pg_backend_pid(), {holder_pid}) "
        "AND (wait_event_type = 'Lock' OR query LIKE 'LOCK TABLE%' OR query LIKE '%lock_timeout%')"
    )
    builder = subprocess.Popen(
        [sys.executable, "-m", "simindex", "build", "docs", "--workers", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(SIMINDEX_DSN=database_dsn),
        # As a shell starts it in the foreground: SIGINT at its default, whatever this test
        # process inherited (a background job's SIGINT is ignored, and exec keeps that).
        preexec_fn=_default_sigint,
    )
    try:
        assert wait_for(lambda: scalar(database_dsn, at_swap) > 0, 120)
        builder.send_signal(signal.SIGINT)
        time.sleep(0.5)  # the signal taken; then the table free for the build's rollback
        holder.close()
        _, stderr = builder.communicate(timeout=TIMEOUT)
    finally:
        holder.close()
        if builder.poll() is None:
            builder.kill()
            builder.communicate()
    assert builder.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert stderr.splitlines()[-1] == (
        "simindex: interrupted: the build was rolled back; the index is as it was before it"
    )
    assert scalar(database_dsn, "SELECT count(*) FROM simindex.docs_simhash") == 3


def test_a_metrics_port_in_use_is_one_line_and_exit_2(database_dsn: str, index: Index) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = simindex(
            "sync", "--follow", "--metrics-port", str(port), SIMINDEX_DSN=database_dsn
        )
    assert result.returncode == 2
    line = one_error_line(result)
    assert f"--metrics-port {port}: cannot listen on 127.0.0.1:{port}" in line
    assert "in use" in line


# -- create, build, query, stats, check, repair, drop


def test_stats_forgets_an_error_once_it_is_resolved(docs: str, index: Index) -> None:
    insert(docs, [(30, "a text longer than the limit given to this sync " * 5)])
    assert simindex("sync", "--max-text-bytes", "100", SIMINDEX_DSN=docs).returncode == 1
    [stats] = run_json("stats", dsn=docs)["indexes"]
    assert "key 30: text is" in stats["last_error"] and stats["failed"] == 1
    assert "last error at" in simindex("stats", SIMINDEX_DSN=docs).stdout
    assert simindex("sync", "--retry-failed", SIMINDEX_DSN=docs).returncode == 0
    [stats] = run_json("stats", dsn=docs)["indexes"]
    assert (stats["last_error"], stats["last_error_at"], stats["failed"]) == (None, None, 0)
    assert "last error" not in simindex("stats", SIMINDEX_DSN=docs).stdout
    # A build forgets it too, when no failed item holds it.
    with psycopg.connect(docs) as conn:
        conn.execute(
            "UPDATE simindex.indexes SET last_error = 'old', last_error_at = now() "
            "WHERE name = 'docs'"
        )
    run_json("build", "docs", dsn=docs)
    [stats] = run_json("stats", dsn=docs)["indexes"]
    assert stats["last_error"] is None


def raw_stderr(*args: str, dsn: str) -> tuple[int, str]:
    """Exit code and the whole of stderr (the superuser warning included) of a command."""
    result = subprocess.run(
        [sys.executable, "-m", "simindex", *args],
        capture_output=True,
        text=True,
        env=environment(SIMINDEX_DSN=dsn),
        timeout=TIMEOUT,
        check=False,
    )
    return result.returncode, result.stderr


def test_the_superuser_warning_comes_once_the_work_went_well(docs: str) -> None:
    """The tests run as a superuser: a failing command shows its error alone, repair does not
    speak of sync, and build and sync say it once they did their work."""
    assert raw_stderr("build", "nosuch", dsn=docs)[1].splitlines() == [
        "simindex: error: no index named 'nosuch'"
    ]
    code, stderr = raw_stderr("sync", "nosuch", dsn=docs)
    assert code == 1 and "superuser" not in stderr, stderr
    assert (
        raw_stderr("create", "docs_body", "--table", "docs", "--column", "body", dsn=docs)[0] == 0
    )
    code, stderr = raw_stderr("build", "docs_body", dsn=docs)
    assert code == 0 and "simindex build runs as a superuser" in stderr
    insert(docs, [(20, "a row the queue holds until sync takes it")])
    code, stderr = raw_stderr("sync", dsn=docs)
    assert code == 0 and "simindex sync runs as a superuser" in stderr
    with psycopg.connect(docs) as conn:
        conn.execute("DELETE FROM simindex.docs_body_simhash WHERE key = 1")
    code, stderr = raw_stderr("repair", "docs_body", dsn=docs)
    assert code == 0 and "superuser" not in stderr, stderr


def run_json(*args: str, stdin: str = "", dsn: str) -> Any:
    """The JSON document a successful command prints."""
    result = simindex(*args, "--json", stdin=stdin, SIMINDEX_DSN=dsn)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_build_refuses_a_text_over_max_text_bytes_as_sync_does(index: Index, docs: str) -> None:
    """A text longer than --max-text-bytes is left out by build, a failed item, as sync leaves
    it out; the build says so and exits 1, as sync does (issue 19, item 12)."""
    long_text = " ".join([TEXTS[1]] * 3)
    insert(docs, [(4, long_text)])
    result = simindex("build", "docs", "--max-text-bytes", str(len(long_text) - 1),
                      "--json", SIMINDEX_DSN=docs)  # fmt: skip
    assert result.returncode == 1
    assert json.loads(result.stdout)["failed"] == 1
    warning = result.stderr.splitlines()
    assert len(warning) == 1 and warning[0].startswith("simindex: 1 row failed: texts over ")
    assert "--retry-failed --max-text-bytes" in warning[0]
    stats = run_json("stats", "docs", dsn=docs)["indexes"][0]
    assert (stats["rows"], stats["failed"]) == (3, 1)
    assert f"key 4: text is {len(long_text)} bytes" in stats["last_error"]

    again = simindex("build", "docs", SIMINDEX_DSN=docs)  # the default limit: 16 MiB
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("built docs: 4 rows indexed, 0 skipped (no text), 0 failed")


def test_a_simhash_index_from_create_to_drop(docs: str) -> None:
    insert(docs, [(10, TEXTS[0].capitalize() + "!"), (11, None)])  # type: ignore[list-item]
    created = simindex("create", "docs_body", "--table", "docs", "--column", "body",
                       "--max-distance", "4", SIMINDEX_DSN=docs)  # fmt: skip
    assert created.returncode == 0, created.stderr
    assert "simindex build docs_body" in created.stdout
    assert "public.docs.body" in created.stdout
    index = get_index(docs, "docs_body")
    assert index.info().state == "created"
    assert index.info().spec.method.max_distance == 4  # type: ignore[union-attr]

    built = run_json("build", "docs_body", dsn=docs)
    assert (built["rows"], built["skipped"]) == (4, 1)  # row 11 has no text
    assert index.info().state == "ready"

    text = TEXTS[0].upper()  # the same text once normalised
    expected = [{"key": m.key, "distance": m.distance} for m in index.near(text)]
    assert [match["key"] for match in expected] == [1, 10]
    by_text = run_json("query", "docs_body", text, dsn=docs)
    assert by_text["matches"] == expected and by_text["max_distance"] == 4
    from_stdin = run_json("query", "docs_body", "--max-distance", "2", "-", stdin=text, dsn=docs)
    assert from_stdin["matches"] == [
        {"key": m.key, "distance": m.distance} for m in index.near(text, max_distance=2)
    ]
    by_key = simindex("query", "docs_body", "--key", "10", SIMINDEX_DSN=docs)
    assert by_key.returncode == 0, by_key.stderr
    rows = [line.split() for line in by_key.stdout.splitlines()[2:]]  # below the header
    assert rows == [[str(m.key), str(m.distance)] for m in index.near_key(10)]
    assert rows and rows[0][0] == "1"

    clean = simindex("check", "docs_body", SIMINDEX_DSN=docs)
    assert clean.returncode == 0, clean.stderr
    assert "checked 5 rows of docs_body: 0 missing, 0 stale, 0 orphaned" in clean.stdout

    stats = run_json("stats", dsn=docs)["indexes"]
    assert [entry["name"] for entry in stats] == ["docs_body"]
    assert (stats[0]["rows"], stats[0]["skipped"], stats[0]["state"]) == (4, 1, "ready")
    with psycopg.connect(docs) as conn:
        conn.execute("INSERT INTO docs VALUES (12, 'queued but not synced yet')")
        size = conn.execute(
            "SELECT pg_total_relation_size('simindex.docs_body_simhash')"
        ).fetchone()
    assert size is not None and stats[0]["tables"]["docs_body_simhash"] == size[0]
    shown = simindex("stats", "docs_body", SIMINDEX_DSN=docs)
    assert shown.returncode == 0, shown.stderr
    line = re.split(r"\s{2,}", shown.stdout.splitlines()[2])  # cells are 2 spaces apart
    assert line[:4] == ["docs_body", "simhash", "public.docs.body", "ready"]
    assert line[5] == "1"  # the queued row 12

    with psycopg.connect(docs) as conn:  # break three rows by hand
        conn.execute("UPDATE simindex.docs_body_simhash SET fingerprint = fingerprint # 1 "
                     "WHERE key = 1")  # fmt: skip
        conn.execute("DELETE FROM simindex.docs_body_simhash WHERE key = 2")
        conn.execute("CREATE TEMP TABLE copied AS SELECT * FROM simindex.docs_body_simhash "
                     "WHERE key = 3")  # fmt: skip
        conn.execute("UPDATE copied SET key = 99")
        conn.execute("INSERT INTO simindex.docs_body_simhash SELECT * FROM copied")
    broken = simindex("check", "docs_body", "--json", SIMINDEX_DSN=docs)
    assert broken.returncode == 1
    report = json.loads(broken.stdout)
    assert (report["missing"], report["stale"], report["orphaned"]) == (2, 1, 1)
    assert (report["missing_keys"], report["stale_keys"]) == ([2, 12], [1])
    assert report["orphaned_keys"] == [99] and report["ok"] is False
    assert report["queued"] == 1  # row 12, which is why the hint says to sync first
    assert "simindex sync docs_body" in broken.stderr

    repaired = run_json("repair", "docs_body", dsn=docs)
    assert (repaired["repaired"], repaired["failed_items"]) == (4, 0)
    again = run_json("check", "docs_body", "--sample", "3", dsn=docs)
    assert again["ok"] is True and again["checked"] <= 6
    assert [m.key for m in index.near_key(10)] == [1]

    dropped = simindex("drop", "docs_body", SIMINDEX_DSN=docs)
    assert dropped.returncode == 0, dropped.stderr
    with pytest.raises(IndexNotFoundError):
        get_index(docs, "docs_body")
    assert run_json("drop", "docs_body", "--missing-ok", dsn=docs) == {
        "indexes": [{"name": "docs_body", "dropped": False}]
    }


def test_drop_takes_several_names_and_drops_none_when_one_is_missing(docs: str) -> None:
    create_index(docs, "first", "docs", "body")
    create_index(docs, "second", "docs", "body")
    refused = simindex("drop", "first", "nosuch", "second", SIMINDEX_DSN=docs)
    assert refused.returncode == 1
    assert "'nosuch'" in one_error_line(refused)
    assert sorted(list_indexes(docs)) == ["first", "second"]

    dropped = simindex("drop", "first", "second", SIMINDEX_DSN=docs)
    assert dropped.returncode == 0, dropped.stderr
    assert dropped.stdout.splitlines() == ["dropped index first", "dropped index second"]
    assert list_indexes(docs) == []


def test_a_minhash_index_with_text_keys(database_dsn: str, tmp_path: Path) -> None:
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE notes (code varchar(20) PRIMARY KEY, body text)")
        conn.cursor().executemany(
            "INSERT INTO notes VALUES (%s, %s)",
            [("a-1", TEXTS[0]), ("b-2", TEXTS[1]), ("c-3", TEXTS[0] + " and a cat")],
        )
    created = run_json("create", "notes", "--table", "notes", "--column", "body",
                       "--method", "minhash", "--threshold", "0.5", "--num-perm", "64",
                       "--shingle-size", "2", dsn=database_dsn)  # fmt: skip
    assert created["spec"]["num_perm"] == 64 and created["spec"]["threshold"] == 0.5
    assert created["source"] == {
        "schema": "public",
        "table": "notes",
        "column": "body",
        "key": "code",
        "key_type": "character varying(20)",
    }
    run_json("build", "notes", dsn=database_dsn)
    index = get_index(database_dsn, "notes")

    by_key = run_json("query", "notes", "--key", "a-1", "--verify", "exact", dsn=database_dsn)
    expected = index.similar(key="a-1", verify="exact")
    assert [m.key for m in expected] == ["c-3"]
    assert by_key["matches"] == [{"key": m.key, "similarity": m.similarity} for m in expected]
    query = tmp_path / "query.txt"
    query.write_text(TEXTS[0], encoding="utf-8")
    from_file = run_json("query", "notes", "--file", str(query), "--limit", "1", dsn=database_dsn)
    assert from_file["matches"] == [
        {"key": m.key, "similarity": m.similarity} for m in index.similar(TEXTS[0])[:1]
    ]
    assert from_file["matches"][0] == {"key": "a-1", "similarity": 1.0}
    assert from_file["verify"] == "exact"
    estimated = run_json("query", "notes", "--key", "a-1", "--verify", "estimate", dsn=database_dsn)
    assert estimated["verify"] == "estimate"
    assert estimated["matches"] == [
        {"key": m.key, "similarity": m.similarity}
        for m in index.similar(key="a-1", verify="estimate")
    ]
    older = simindex("query", "notes", "--key", "a-1", "--exact", SIMINDEX_DSN=database_dsn)
    assert older.returncode == 2  # one spelling: --verify exact
    assert "--exact" in older.stderr


def test_create_with_token_options(database_dsn: str, tmp_path: Path) -> None:
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE pages (id integer PRIMARY KEY, html text)")
    created = run_json("create", "pages", "--table", "pages", "--column", "html",
                       "--method", "minhash", "--punctuation", "delete", "--identifiers",
                       "--numbers", "drop", "--strip-markup", dsn=database_dsn)  # fmt: skip
    assert created["spec"]["shingling"] == {
        "unit": "word",
        "size": 3,
        "with_characters": False,
        "seed": 0,
        "punctuation": "delete",
        "identifiers": True,
        "numbers": "drop",
        "strip_markup": True,
        "tokenizer": None,
    }
    on_pages = ("--table", "pages", "--column", "html")
    # The CLI finds a tokenizer by name in the entry points of what is installed.
    info = tmp_path / "shipped_words-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: shipped-words\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[simindex.tokenizers]\nshipped-words = tests.unit.tokenizers:words\n"
    )
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    own = simindex("create", "code", *on_pages, "--tokenizer", "shipped-words",
                   SIMINDEX_DSN=database_dsn, PYTHONPATH=path)  # fmt: skip
    assert own.returncode == 0, own.stderr
    assert "(tokenizer shipped-words)" in own.stdout
    missing = simindex("create", "other", *on_pages, "--tokenizer", "shipped-words",
                       SIMINDEX_DSN=database_dsn)  # fmt: skip
    assert missing.returncode == 1
    assert "no tokenizer named 'shipped-words' is registered" in one_error_line(missing)
    path_given = simindex("create", "other", *on_pages, "--tokenizer", "builtins:eval",
                          SIMINDEX_DSN=database_dsn)  # fmt: skip
    assert path_given.returncode != 0
    assert "registered in this process" in path_given.stderr


def test_create_ignoring_common_shingles(database_dsn: str) -> None:
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE crates (id integer PRIMARY KEY, body text)")
        conn.execute(
            "INSERT INTO crates SELECT g, 'the source of the rust crate packaged for debian: '"
            " || md5(g::text) FROM generate_series(1, 40) g"
        )
    on_crates = ("--table", "crates", "--column", "body")
    created = simindex("create", "crates", *on_crates, "--method", "minhash",
                       "--ignore-common", "0.1", SIMINDEX_DSN=database_dsn)  # fmt: skip
    assert created.returncode == 0, created.stderr
    assert "ignoring shingles in more than 10.00% of rows" in created.stdout
    assert simindex("build", "crates", SIMINDEX_DSN=database_dsn).returncode == 0
    info = run_json("stats", "crates", dsn=database_dsn)["indexes"][0]
    assert info["spec"]["ignore_common"] == 0.1
    assert info["spec"]["shingle_counts"]["rows"] == 40
    assert info["spec"]["shingle_counts"]["common"] > 0
    idf = run_json("create", "crates_idf", *on_crates, "--idf", "--ignore-common", "0.2",
                   dsn=database_dsn)  # fmt: skip
    assert idf["spec"]["idf"] is True and idf["spec"]["ignore_common"] == 0.2
    refused = simindex("create", "other", *on_crates, "--idf", "--method", "minhash",
                       SIMINDEX_DSN=database_dsn)  # fmt: skip
    assert refused.returncode == 2
    assert "--idf: an option of --method simhash" in one_error_line(refused)
    wrong = simindex("create", "other", *on_crates, "--ignore-common", "1.5",
                     SIMINDEX_DSN=database_dsn)  # fmt: skip
    assert wrong.returncode == 2  # a bad option: a usage error, named as typed
    assert "--ignore-common must be a share of rows between 0 and 1" in one_error_line(wrong)


@pytest.mark.parametrize(
    ("args", "stdin", "code", "expected"),
    [
        (["query", "nosuchindex", "some text"], "", 1, "nosuchindex"),
        (["build", "nosuchindex"], "", 1, "nosuchindex"),
        (["query", "docs", "-"], "", 1, "stdin is empty"),
        (["query", "docs", "--file", "no/such/file.txt"], "", 1, "no/such/file.txt"),
        (["query", "docs", "--key", "seven"], "", 1, "seven"),
        (["query", "docs", "--key", "1", "text too"], "", 2, "exactly one of"),
        (["query", "docs", "some text", "--threshold", "0.5"], "", 2, "simhash index"),
        (["query", "docs", "some text", "--verify", "exact"], "", 2, "simhash index"),
        (
            [
                "create",
                "x",
                "--table",
                "docs",
                "--column",
                "body",
                "--method",
                "minhash",
                "--threshold",
                "1.5",
            ],
            "",
            2,
            "--threshold must be between 0 and 1, got 1.5",
        ),
        (
            ["create", "x", "--table", "docs", "--column", "body", "--max-distance", "99"],
            "",
            2,
            "--max-distance must be from 0 to 63 (bits of a 64-bit SimHash), got 99",
        ),
        (["check", "docs", "--fraction", "2"], "", 2, "--fraction must be in (0, 1]"),
        (
            ["create", "x", "--table", "docs", "--column", "body", "--num-perm", "64"],
            "",
            2,
            "--num-perm",
        ),
    ],
)
def test_bad_input_is_one_line(
    database_dsn: str, index: Index, args: list[str], stdin: str, code: int, expected: str
) -> None:
    result = simindex(*args, stdin=stdin, SIMINDEX_DSN=database_dsn)
    assert result.returncode == code
    assert expected in one_error_line(result)


def test_version() -> None:
    import simindex as package

    result = simindex("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"simindex {package.__version__}"
    assert package.__version__[0].isdigit()


def test_fingerprint_is_what_the_sql_function_takes(index: Index, docs: str) -> None:
    result = simindex("fingerprint", "docs", TEXTS[1], SIMINDEX_DSN=docs)
    assert result.returncode == 0, result.stderr
    value = int(result.stdout)
    assert value == index.fingerprint(TEXTS[1])
    assert run_json("fingerprint", "docs", "-", stdin=TEXTS[1], dsn=docs) == {
        "index": "docs",
        "fingerprint": value,
    }
    with psycopg.connect(docs) as conn:
        found = conn.execute("SELECT key FROM simindex.docs_near_v1(%s, 0)", (value,)).fetchall()
    assert found == [(2,)]
    empty = simindex("fingerprint", "docs", "!!!", SIMINDEX_DSN=docs)
    assert "no features" in one_error_line(empty)


def test_a_minhash_fingerprint_calls_the_sql_function_by_its_parameter_names(
    database_dsn: str,
) -> None:
    """``fingerprint --json`` names the values as the SQL function's parameters are named."""
    from simindex import sync
    from simindex.core.spec import MinHash

    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE notes (id integer PRIMARY KEY, body text)")
    create_index(database_dsn, "notes", "notes", "body", method=MinHash(threshold=0.5))
    with psycopg.connect(database_dsn) as conn:  # the triggers queue them, sync indexes them
        conn.cursor().executemany("INSERT INTO notes VALUES (%s, %s)", list(enumerate(TEXTS)))
    sync(database_dsn, ["notes"])
    arrays = run_json("fingerprint", "notes", TEXTS[0], dsn=database_dsn)
    assert set(arrays) == {"index", "sketch", "band_keys", "set_hash"}
    text = simindex("fingerprint", "notes", TEXTS[0], SIMINDEX_DSN=database_dsn).stdout
    assert [line.split()[0] for line in text.splitlines()] == ["sketch", "band_keys", "set_hash"]
    with psycopg.connect(database_dsn) as conn:
        found = conn.execute(
            "SELECT key, identical FROM simindex.notes_similar_v1(sketch => "
            "%(sketch)s::bit varying, band_keys => %(band_keys)s, set_hash => %(set_hash)s)",
            arrays,
        ).fetchall()
    assert found == [(0, True)]


def test_query_shows_columns(index: Index, docs: str) -> None:
    insert(docs, [(10, TEXTS[0].replace("today", "tonight"))])
    index.build()
    result = simindex("query", "docs", "--key", "1", "--show", "body", SIMINDEX_DSN=docs)
    assert result.returncode == 0, result.stderr
    header, _, *rows = result.stdout.splitlines()
    assert header.split() == ["key", "distance", "body"]
    assert rows and rows[0].split()[0] == "10" and "the quick brown fox" in rows[0]


def test_check_sample_says_the_count_varies(index: Index, docs: str) -> None:
    insert(docs, [(key, f"row number {key} of a few more words") for key in range(10, 60)])
    index.build()
    result = simindex("check", "docs", "--sample", "20", SIMINDEX_DSN=docs)
    assert result.returncode == 0, result.stderr
    assert "a random sample of about 20 rows" in result.stdout
    assert "so the count varies" in result.stdout


def test_grant_gives_a_right_and_refuses_an_unknown_role_in_one_line(database_dsn: str) -> None:
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS simindex_cli_reader")
        conn.execute("CREATE ROLE simindex_cli_reader")
    try:
        result = simindex(
            "grant", "simindex_cli_reader", "--reader", "--json", "--dsn", database_dsn
        )
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout) == {
            "role": "simindex_cli_reader",
            "right": "reader",
            "indexes": None,
            "tables_not_granted": [],
        }
        with psycopg.connect(database_dsn) as conn:
            row = conn.execute(
                "SELECT has_table_privilege('simindex_cli_reader', 'simindex.indexes', 'SELECT')"
            ).fetchone()
        assert row == (True,)
        # A right on some indexes only.
        with psycopg.connect(database_dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE docs (id integer PRIMARY KEY, body text)")
        create_index(database_dsn, "docs", "docs", "body")
        result = simindex(
            "grant", "simindex_cli_reader", "--worker", "--index", "docs", "--dsn", database_dsn
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("granted worker to simindex_cli_reader on docs")
        with psycopg.connect(database_dsn) as conn:
            row = conn.execute(
                "SELECT has_table_privilege('simindex_cli_reader', 'simindex.docs_queue', 'DELETE')"
            ).fetchone()
        assert row == (True,)
        refused = simindex(
            "grant", "simindex_cli_reader", "--admin", "--index", "docs", "--dsn", database_dsn
        )
        assert refused.returncode == 1
        assert "admin" in one_error_line(refused)
        unknown = simindex("grant", "no_such_role_here", "--worker", "--dsn", database_dsn)
        assert unknown.returncode == 1
        assert "no_such_role_here" in one_error_line(unknown)
        assert simindex("grant", "simindex_cli_reader", "--dsn", database_dsn).returncode == 2
    finally:
        with psycopg.connect(database_dsn, autocommit=True) as conn:
            conn.execute("DROP OWNED BY simindex_cli_reader")
            conn.execute("DROP ROLE simindex_cli_reader")
