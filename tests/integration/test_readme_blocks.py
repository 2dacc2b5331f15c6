"""Every other code block of the README, run as written against a real PostgreSQL: Python
blocks in one namespace (given what they assume: ``engine``, ``idx``, ``notes``, texts, an
ORM ``Document``, a ``session``; ``op`` for Alembic blocks), SQL blocks through psycopg (rolled
back), shell blocks through ``bash`` with ``simindex`` on ``PATH`` and ``SIMINDEX_DSN`` set.
A block that cannot run here says why in an HTML comment right before it
(``<!-- not run: reason -->``); any other block is run, so a new block cannot drift unseen.
The "## Workflows" blocks are run by ``test_readme.py``, each workflow on a fresh database."""

from __future__ import annotations

import contextlib
import functools
import io
import os
import re
import signal
import subprocess
import sys
import threading
import types
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from alembic import op
from alembic.migration import MigrationContext
from alembic.operations import Operations
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy import BigInteger, DateTime, Text, create_engine, func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

import simindex
import simindex.alembic
import simindex.sqlalchemy

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"(<!-- not run: [^>]+-->\n+)?^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
RUN = ("python", "sql", "sh")
WORLD = ("docs_body", "notes")  # the indexes the blocks take for granted
BASE = "the quick brown fox jumps over the lazy dog near the river bank number {}"
TWIN = "the quick brown fox jumps over the lazy dog near the river bank number {} today"


def blocks() -> list[tuple[bool, str, str]]:
    """(marked not run, language, code) of every block outside the Workflows section."""
    text = README.read_text(encoding="utf-8")
    head, rest = text.split("\n## Workflows\n", 1)
    tail = rest.split("\n## ", 1)[1]
    return [
        (bool(marker), language, code)
        for part in (head, "## " + tail)
        for marker, language, code in BLOCK.findall(part)
    ]


def test_every_block_is_run_or_says_why_not() -> None:
    unrunnable = [code for marked, language, code in blocks() if not marked and language not in RUN]
    assert unrunnable == [], "mark these <!-- not run: reason -->, or run them"
    assert sum(not marked for marked, _, _ in blocks()) >= 30


class Base(DeclarativeBase):
    pass


class Document(Base):
    __tablename__ = "documents"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    body: Mapped[str | None] = mapped_column(Text)
    title: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


@pytest.fixture
def engine(database_dsn: str) -> Iterator[Engine]:
    made = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(database_dsn))
    yield made
    made.dispose()


def load_tables(dsn: str) -> None:
    """documents and notes, ids 1..60 but 7 (the ORM block adds it), every even row a near copy
    of the odd one before it; titles and update times for --show and survivors."""
    keys = [key for key in range(1, 61) if key != 7]
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "CREATE TABLE documents (id bigint PRIMARY KEY, body text, title text,"
            " updated_at timestamptz NOT NULL DEFAULT now())"
        )
        conn.execute("CREATE TABLE notes (id bigint PRIMARY KEY, body text)")
        for table in ("documents", "notes"):
            conn.cursor().executemany(
                f"INSERT INTO {table} (id, body) VALUES (%s, %s)",
                [(key, (TWIN if key % 2 == 0 else BASE).format(key - key % 2)) for key in keys],
            )
        conn.execute("UPDATE documents SET title = 'title ' || id")


def ensure_world(engine: Engine) -> None:
    """docs_body (SimHash, k=3) and notes (MinHash, 0.8), built, whatever a block dropped."""
    have = simindex.list_indexes(engine)
    if "docs_body" not in have:
        simindex.create_index(
            engine,
            "docs_body",
            table="documents",
            column="body",
            method=simindex.SimHash(max_distance=3),
        ).build()
    if "notes" not in have:
        simindex.create_index(
            engine,
            "notes",
            table="notes",
            column="body",
            method=simindex.MinHash(threshold=0.8, num_perm=128),
        ).build()


CREATES = re.compile(
    r"""create_index\(engine, "(\w+)"|simindex create (\w+)|create_simindex\("(\w+)"|"""
    r"""CreateSimindexOp\("(\w+)\""""
)


def make_room(code: str, engine: Engine) -> None:
    """Drop the indexes a block creates, so that its create succeeds as written."""
    for found in CREATES.findall(code):
        name = next(part for part in found if part)
        if name in simindex.list_indexes(engine):
            simindex.drop_index(engine, name)


GRANTS = re.compile(r"simindex grant (\w+)")


@contextlib.contextmanager
def roles(code: str, dsn: str) -> Iterator[None]:
    """The login roles a block grants rights to, made for it and dropped after it."""
    made = GRANTS.findall(code)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name in made:
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
    try:
        yield
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for name in made:
                conn.execute(
                    sql.SQL("DROP OWNED BY {0}; DROP ROLE {0}").format(sql.Identifier(name))
                )


def after(seconds: float, send: Any) -> threading.Timer:
    timer = threading.Timer(seconds, send)
    timer.start()
    return timer


def run_python(code: str, namespace: dict[str, Any], engine: Engine) -> None:
    compiled = compile(code, str(README), "exec")
    if "follow=True" in code:  # a worker that runs until SIGTERM: send it one
        timer = after(1.5, lambda: os.kill(os.getpid(), signal.SIGTERM))
        try:
            exec(compiled, namespace)  # the README's own code
        finally:
            timer.cancel()
    elif "op." in code:  # an Alembic migration's body
        offline = "--sql" in namespace.get("_before", "")
        if offline:
            buffer = io.StringIO()
            context = MigrationContext.configure(
                dialect_name="postgresql", opts={"as_sql": True, "output_buffer": buffer}
            )
            with Operations.context(context):
                exec(compiled, namespace)
            assert "CREATE" in buffer.getvalue()
        else:
            with (
                engine.begin() as connection,
                Operations.context(MigrationContext.configure(connection)),
            ):
                exec(compiled, namespace)
    else:
        exec(compiled, namespace)


def shell_lines(code: str) -> Iterator[str]:
    for line in code.replace("\\\n", " ").splitlines():
        if line.strip():
            yield line


def run_shell(code: str, dsn: str, directory: Path) -> None:
    shim = directory / "bin" / "simindex"
    shim.parent.mkdir(exist_ok=True)
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m simindex "$@"\n')
    shim.chmod(0o755)
    parts = conninfo_to_dict(dsn)
    env = os.environ | {
        "SIMINDEX_DSN": dsn,
        "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}",
        **{
            f"PG{key.upper()}": str(parts[key])
            for key in ("host", "port", "user", "dbname")
            if key in parts
        },
        **({"PGPASSWORD": str(parts["password"])} if "password" in parts else {}),
    }
    env["PGDATABASE"] = env.pop("PGDBNAME", env.get("PGDATABASE", ""))
    for line in shell_lines(code):
        process = subprocess.Popen(
            ["bash", "-c", line],
            cwd=directory,
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        if "--follow" in line:  # runs until SIGTERM; the README says it then exits 0
            timer = after(2.0, functools.partial(process.send_signal, signal.SIGTERM))
        out, err = process.communicate(timeout=60)
        if "--follow" in line:
            timer.cancel()
        assert process.returncode == 0, f"{line}\n{out}\n{err}"


def run_sql(code: str, dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        for statement in filter(str.strip, code.split(";\n")):
            conn.execute(statement.encode())
        conn.rollback()  # a DELETE example leaves the tables as the next blocks expect


def tokens(text: str) -> list[str]:
    return text.split()


@pytest.fixture
def myapp() -> Iterator[None]:
    """The module of the tokenizer example (``myapp.text.tokens``)."""
    package, module = types.ModuleType("myapp"), types.ModuleType("myapp.text")
    module.tokens = tokens  # type: ignore[attr-defined]
    package.text = module  # type: ignore[attr-defined]
    sys.modules |= {"myapp": package, "myapp.text": module}
    yield
    del sys.modules["myapp"], sys.modules["myapp.text"]


def test_every_other_block_runs_as_written(
    database_dsn: str, engine: Engine, tmp_path: Path, myapp: None
) -> None:
    load_tables(database_dsn)
    ensure_world(engine)
    texts = [BASE.format(n) for n in range(3)] + [TWIN.format(0)]
    namespace: dict[str, Any] = {
        "engine": engine,
        "simindex": simindex,
        "select": select,
        "Document": Document,
        "op": op,
        "CreateSimindexOp": simindex.alembic.CreateSimindexOp,
        "text": texts[0],
        "text_a": texts[0],
        "text_b": texts[3],
        "texts": texts,
        "idf": {"quick": 2.0, "fox": 3.0},
    }
    source = README.read_text(encoding="utf-8")
    ran = 0
    with Session(engine) as session:
        namespace["session"] = session
        for marked, language, code in blocks():
            if marked or language not in RUN:
                continue
            ensure_world(engine)
            namespace["idx"] = simindex.get_index(engine, "docs_body")
            namespace["notes"] = simindex.get_index(engine, "notes")
            make_room(code, engine)
            namespace["_before"] = source[max(0, source.index(code) - 300) : source.index(code)]
            if language == "python":
                run_python(code, namespace, engine)
            elif language == "sql":
                run_sql(code, database_dsn)
            else:
                with roles(code, database_dsn):
                    run_shell(code, database_dsn, tmp_path)
            ran += 1
    assert ran >= 30
