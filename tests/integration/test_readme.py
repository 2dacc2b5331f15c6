"""The README's workflows, run as written: every code block under "## Workflows", in order,
per workflow, on a fresh database. Python blocks run in one namespace per workflow (given
``engine``, and ``rows`` to load), SQL blocks through psycopg, shell blocks line by line with
``simindex`` as ``python -m simindex``. A block that defines ``upgrade()`` is an Alembic
migration: it is run in an Alembic operations context, as ``alembic upgrade`` would."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from alembic.migration import MigrationContext
from alembic.operations import Operations
from sqlalchemy.engine import Engine

import simindex.alembic  # noqa: F401  # registers op.create_simindex, as env.py would

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
TEXTS = [
    "the quick brown fox jumps over the lazy dog near the river bank today",
    "the quick brown fox jumps over the lazy dog near the river bank tonight",
    "a completely different sentence about databases, indexes and fingerprints",
]
# What each workflow starts from: the table the user already has, or nothing.
HAS_TABLE = {
    "Index a table you already have": True,
    "Index a table your migration creates empty, filled later": False,
    "Change an index's parameters without downtime": True,
}


def workflows() -> dict[str, list[tuple[str, str]]]:
    """Workflow title -> its (language, code) blocks, from the README's Workflows section."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Workflows\n", 1)[1].split("\n## ", 1)[0]
    found: dict[str, list[tuple[str, str]]] = {}
    for part in section.split("\n### ")[1:]:
        title, body = part.split("\n", 1)
        found[title.strip()] = BLOCK.findall(body)
    return found


def test_the_readme_has_the_workflows_the_tests_run() -> None:
    assert list(workflows()) == list(HAS_TABLE)
    assert all(workflows().values())


def fresh_database(dsn: str) -> None:
    """The test database without simindex's schema: the workflows install it themselves."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA simindex CASCADE")


def run_python(code: str, namespace: dict[str, Any], engine: Engine) -> None:
    exec(compile(code, str(README), "exec"), namespace)  # the README's own code
    upgrade = namespace.pop("upgrade", None)
    if upgrade is not None:
        with (
            engine.begin() as connection,
            Operations.context(MigrationContext.configure(connection)),
        ):
            upgrade()


def run_shell(code: str, dsn: str) -> None:
    for line in code.splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        assert words[0] == "simindex", line
        result = subprocess.run(
            [sys.executable, "-m", "simindex", *words[1:]],
            capture_output=True,
            text=True,
            env=os.environ | {"SIMINDEX_DSN": dsn},
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, f"{line}: {result.stderr}"


@pytest.mark.parametrize("title", list(HAS_TABLE))
def test_a_workflow_runs_as_written(title: str, database_dsn: str, engine: Engine) -> None:
    fresh_database(database_dsn)
    rows = [{"id": key, "body": text} for key, text in enumerate(TEXTS, start=1)]
    if HAS_TABLE[title]:
        with psycopg.connect(database_dsn) as conn:
            conn.execute("CREATE TABLE documents (id bigint PRIMARY KEY, body text)")
            conn.cursor().executemany("INSERT INTO documents VALUES (%(id)s, %(body)s)", rows)
    if title.startswith("Change"):  # it starts where the first workflow ends
        run_python(workflows()["Index a table you already have"][0][1], {"engine": engine}, engine)
    namespace: dict[str, Any] = {"engine": engine, "rows": rows}
    for language, code in workflows()[title]:
        if language == "python":
            run_python(code, namespace, engine)
        elif language == "sql":
            with psycopg.connect(database_dsn) as conn:
                assert conn.execute(code.encode()).fetchall() == [(2, 3)]
        elif language == "sh":
            run_shell(code, database_dsn)
        else:
            pytest.fail(f"a {language} block in workflow {title!r}: the tests cannot run it")
    if "matches" in namespace:
        assert [(m.key, m.distance) for m in namespace["matches"]] == [(2, 3)]
    with psycopg.connect(database_dsn) as conn:
        names = [name for (name,) in conn.execute("SELECT name FROM simindex.indexes")]
        queued = conn.execute(
            f"SELECT (SELECT count(*) FROM simindex.{names[0]}_queue)"
            f" + (SELECT count(*) FROM simindex.{names[0]}_inbox)"
        ).fetchone()
    assert queued == (0,)
    assert names == (["docs_body_v2"] if title.startswith("Change") else ["docs_body"])
