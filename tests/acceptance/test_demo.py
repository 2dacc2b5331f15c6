"""The demo, run as a newcomer runs it: in a subprocess, with and without a database of theirs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from simindex.demo import DEMO_SCHEMA, DEMO_TABLE, GROUPS_SHOWN, INDEXES, MEMBERS_SHOWN, documents
from simindex.index import Index, list_indexes

RUN = "import sys; from simindex.demo import run; run({dsn}, out=sys.stdout, err=sys.stderr)"
TIMEOUT = 300
GROUP_HEADER = re.compile(r"^  (\d+) rows, like: ", re.MULTILINE)
MEMBER = re.compile(r"^ +(\d+)  (\S+) +\S", re.MULTILINE)


def demo_process(dsn: str | None, **env: str) -> subprocess.Popen[str]:
    code = RUN.format(dsn="sys.argv[1]" if dsn is not None else "None")
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("PG") and name not in {"SIMINDEX_DSN", "DATABASE_URL"}
    }
    return subprocess.Popen(
        [sys.executable, "-c", code, *([dsn] if dsn is not None else [])],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=environment | env,
    )


def finish(process: subprocess.Popen[str]) -> str:
    return finish_with_progress(process)[0]


def finish_with_progress(process: subprocess.Popen[str]) -> tuple[str, str]:
    stdout, stderr = process.communicate(timeout=TIMEOUT)
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert stderr.startswith("simindex: ")  # progress, on stderr only
    assert "superuser" not in stderr  # the demo's role is nobody's worker
    return stdout, stderr


def check_report(stdout: str) -> None:
    assert f"{len(documents()):,} Debian 12 package descriptions" in stdout
    for step in ("load (COPY)", *INDEXES):
        # rows, seconds and megabytes of each step
        assert re.search(
            rf"^  {re.escape(step)} +[\d,]+ +\d+\.\d\d s +\d+\.\d MB", stdout, re.MULTILINE
        )
    sizes = [int(size) for size in GROUP_HEADER.findall(stdout)]
    assert len(sizes) == GROUPS_SHOWN * len(INDEXES)
    assert all(size >= 2 for size in sizes)
    packages = {document.package for document in documents()}
    shown = [package for _, package in MEMBER.findall(stdout)]
    assert shown and set(shown) <= packages
    assert max(len(line) for line in stdout.splitlines()) <= 100


@pytest.fixture
def short_temp_dir() -> Iterator[Path]:
    """A temporary directory for the demo's throwaway server, short enough for its socket."""
    path = Path(tempfile.mkdtemp(prefix="sdemo-"))
    path.chmod(0o755)  # as root the server runs as another user, who must reach its directory
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def processes_inside(directory: Path) -> set[int]:
    """Processes whose working directory or command line lies in ``directory``.

    PostgreSQL's postmaster is started with ``-D <data directory>``, and it and every child
    work in that directory, so this finds the whole server.
    """
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if cwd.startswith(str(directory)) or str(directory) in cmdline:
            found.add(int(entry.name))
    return found


def running(pid: int) -> bool:
    """Whether the process exists and has not exited (a zombie waiting for its parent has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] not in {"Z", "X"}


def gone(pids: set[int], seconds: float = 10.0) -> bool:
    """Whether all ``pids`` have exited, allowing them ``seconds`` to finish exiting."""
    deadline = time.monotonic() + seconds
    while any(running(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.skipif(not Path("/proc/self/cwd").exists(), reason="needs Linux's /proc")
def test_demo_without_a_database_starts_and_removes_its_own(short_temp_dir: Path) -> None:
    process = demo_process(None, TMPDIR=str(short_temp_dir))
    servers: set[int] = set()
    server_dirs: set[str] = set()
    while process.poll() is None:
        server_dirs |= {path.name for path in short_temp_dir.glob("simindex-pg-*")}
        servers |= processes_inside(short_temp_dir) - {process.pid}
        time.sleep(0.05)
    stdout, stderr = finish_with_progress(process)
    check_report(stdout)
    assert "throwaway PostgreSQL" in stdout
    assert re.search(r"^simindex: started PostgreSQL \d+\.\d+ from ", stderr, re.MULTILINE)
    assert server_dirs and servers, "the demo ran its server in its temporary directory"
    assert list(short_temp_dir.iterdir()) == []
    assert gone(servers)
    assert not any(running(pid) for pid in processes_inside(short_temp_dir))


def test_demo_in_a_database_leaves_its_tables_and_indexes(database_dsn: str) -> None:
    first = finish(demo_process(database_dsn))
    check_report(first)
    again = finish(demo_process(database_dsn))  # replaces what the first run left
    check_report(again)

    assert sorted(list_indexes(database_dsn)) == sorted(INDEXES)
    assert f"simindex drop {' '.join(INDEXES)}" in again
    assert f"DROP TABLE {DEMO_SCHEMA}.{DEMO_TABLE};" in again
    query_lines = [line.strip() for line in again.splitlines() if line.startswith("  SELECT")]
    query_lines += [line.strip() for line in again.splitlines() if line.startswith("  JOIN")]
    with psycopg.connect(database_dsn) as conn:
        count = conn.execute(f"SELECT count(*) FROM {DEMO_SCHEMA}.{DEMO_TABLE}").fetchone()
        assert count == (len(documents()),)
        rows = conn.execute(" ".join(query_lines).encode()).fetchall()  # the query it suggests
    assert rows and all(distance <= 3 for *_, distance in rows)

    # The first group it printed is what the SimHash index links, directly or through others.
    header = GROUP_HEADER.search(again)
    assert header is not None
    shown = {int(key) for key, _ in MEMBER.findall(again[header.end() :])[:MEMBERS_SHOWN]}
    index = Index(database_dsn, "demo_simhash")
    group, frontier = {min(shown)}, [min(shown)]
    while frontier:
        found = {match.key for match in index.near_key(frontier.pop())} - group
        group |= found
        frontier += found
    assert shown <= group
    assert len(group) == int(header.group(1))
    similar = Index(database_dsn, "demo_minhash").similar(key=min(shown))
    assert all(match.similarity >= 0.7 for match in similar)

    # The cleanup it prints works as printed, in its order: the indexes, then the table.
    lines = again.splitlines()
    drop = next(line.strip() for line in lines if line.strip().startswith("simindex drop "))
    drop_table = next(line.strip() for line in lines if line.strip().startswith("DROP TABLE "))
    dropped = subprocess.run(
        [sys.executable, "-m", "simindex", *drop.split()[1:]],
        capture_output=True,
        text=True,
        env=os.environ | {"SIMINDEX_DSN": database_dsn},
        timeout=TIMEOUT,
        check=False,
    )
    assert dropped.returncode == 0, dropped.stderr
    assert list_indexes(database_dsn) == []
    with psycopg.connect(database_dsn) as conn:
        conn.execute(drop_table.encode())
