"""``build()`` with worker processes, called the ways people call it: a script on stdin, a
``python -c`` string, a script with no ``if __name__ == "__main__":`` guard. Each runs in a
subprocess of its own and must build once, with its workers, and run its script once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from simindex.index import create_index

ROWS = 2000
TIMEOUT = 120

SCRIPT = """\
import sys
import warnings
import simindex
from simindex.errors import SerialBuildWarning
from simindex.ops import workers
warnings.simplefilter("{action}", SerialBuildWarning)
{before}
print("started", flush=True)
report = simindex.get_index(sys.argv[1], "docs").build(workers=2, batch_size=100)
print("built", report.rows, flush=True)
"""


@pytest.fixture
def docs(database_dsn: str) -> str:
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE docs (id integer PRIMARY KEY, body text)")
        with conn.cursor().copy("COPY docs FROM STDIN") as copy:
            for i in range(ROWS):
                copy.write_row((i, f"document {i} about {i % 97} and {i % 89} things"))
    create_index(database_dsn, "docs", "docs", "body")
    return database_dsn


def run(args: list[str], dsn: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args, dsn],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        env=os.environ | {"PYTHONWARNINGS": ""},
    )


def built_once(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["started", f"built {ROWS}"]
    assert "Error" not in result.stderr


def test_a_script_on_stdin(docs: str) -> None:
    built_once(run(["-"], docs, stdin=SCRIPT.format(action="error", before="")))


def test_a_python_c_string(docs: str) -> None:
    built_once(run(["-c", SCRIPT.format(action="error", before="")], docs))


def test_a_script_without_a_main_guard(docs: str, tmp_path: Path) -> None:
    script = tmp_path / "unguarded.py"
    script.write_text(SCRIPT.format(action="error", before=""))
    built_once(run([str(script)], docs))


def test_workers_that_cannot_start_leave_the_work_to_the_caller_and_say_why(
    docs: str, tmp_path: Path
) -> None:
    # Spawned workers re-import __main__, which a script on stdin does not have as a file.
    forced = SCRIPT.format(action="default", before='workers.start_method = lambda: "spawn"')
    result = subprocess.run(
        [sys.executable, "-", docs],
        input=forced,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["started", f"built {ROWS}"]
    assert "SerialBuildWarning" in result.stderr
    assert "could not start" in result.stderr and "__main__" in result.stderr
