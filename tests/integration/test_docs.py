"""Every code block of README.md and docs/*.md, run as written against a real PostgreSQL.

Each block is a test of its own, on a database of its own copied from a prepared template,
in a fresh namespace: what it needs is said by a tag right before it, never by the blocks
before it, so a block can move within a page or to another page and still run. Tags are
HTML comments (invisible on the page):

- ``<!-- not run: reason -->``: not run, and says why (a pip install, a systemd unit, ...).
- ``<!-- given: WORDS -->``: what the block starts from, comma-separated:
  ``world`` (the default without a tag): simindex's schema, the tables ``documents (id bigint
  PRIMARY KEY, body text, title text, updated_at timestamptz)`` and ``notes (id bigint PRIMARY
  KEY, body text)``, rows 1..60 but 7, every even row a near copy of the odd one before it, and
  the indexes ``docs_body`` (SimHash, k=3) and ``notes`` (MinHash, 0.8), built;
  ``tables``: the same without the indexes;
  ``clustered``: ``docs_body``'s clusters computed (``idx.clusters()``) before the block;
  ``alembic``: the block is the body of an Alembic migration, run with ``op`` in an
  operations context on the database; ``alembic --sql``: the same, offline.

Python blocks get ``engine`` (an Engine), ``simindex`` imported, ``idx`` and ``notes`` (the
two Index objects, under ``world``), ``session`` (an ORM Session), ``Document`` (the ORM class
of ``documents``), ``select``, ``text``, ``text_a``, ``text_b``, ``texts`` and ``idf``. SQL
blocks run through psycopg, statement by statement, and are rolled back. Shell blocks run
line by line in ``bash`` with ``simindex`` on ``PATH`` and ``SIMINDEX_DSN``/``PG*`` set; a
``--follow`` worker gets SIGTERM after 2 s and must exit 0; ``simindex grant ROLE`` gets the
login role made for it. The README's "## Workflows" are stories, each a sequence of blocks:
``test_readme.py`` runs them, each workflow on a fresh database.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import types
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from alembic import op
from alembic.migration import MigrationContext
from alembic.operations import Operations
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from sqlalchemy import BigInteger, DateTime, Text, create_engine, func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

import simindex
import simindex.alembic
import simindex.sqlalchemy
from simindex.db.connection import dispose_engines
from tests.commands import run_simindex
from tests.postgres import TEMPLATE, Server

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
TAG = r"<!-- (not run|given): ([^>]*?) ?-->\n+"
BLOCK = re.compile(rf"(?:{TAG})?^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
RUN = ("python", "sql", "sh")
DATABASES = ("world", "tables")
CONTEXTS = ("alembic", "alembic --sql", "clustered")
BASE = "the quick brown fox jumps over the lazy dog near the river bank number {}"
TWIN = "the quick brown fox jumps over the lazy dog near the river bank number {} today"


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    language: str
    code: str
    not_run: str | None  # the reason, when the block says it cannot run here
    given: tuple[str, ...]

    @property
    def database(self) -> str:
        return next((word for word in self.given if word in DATABASES), "world")

    @property
    def context(self) -> str | None:
        return next((word for word in self.given if word.startswith("alembic")), None)


def workflows_span(text: str) -> range:
    """Where the README's "## Workflows" section lies: test_readme.py runs its blocks."""
    start = text.find("\n## Workflows\n")
    if start < 0:
        return range(0)
    end = text.find("\n## ", start + 1)
    return range(start, end if end >= 0 else len(text))


def page_blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    skip = workflows_span(text) if path.name == "README.md" else range(0)
    found = []
    for match in BLOCK.finditer(text):
        if match.start() in skip:
            continue
        kind, words, language, code = match.groups()
        found.append(
            Block(
                page=str(path.relative_to(ROOT)),
                line=text.count("\n", 0, match.start(3 if kind else 0)) + 1,
                language=language,
                code=code,
                not_run=words if kind == "not run" else None,
                given=tuple(w.strip() for w in words.split(",")) if kind == "given" else (),
            )
        )
    return found


ALL = [block for page in PAGES for block in page_blocks(page)]
RUNNABLE = [block for block in ALL if block.not_run is None]


def test_every_block_is_run_or_says_why_not() -> None:
    unrunnable = [f"{b.page}:{b.line}" for b in RUNNABLE if b.language not in RUN]
    assert unrunnable == [], "mark these <!-- not run: reason -->, or run them"
    unknown = [
        f"{b.page}:{b.line} {word!r}"
        for b in RUNNABLE
        for word in b.given
        if word not in DATABASES + CONTEXTS
    ]
    assert unknown == [], f"given: one of {DATABASES + CONTEXTS}"
    assert all(block.not_run for block in ALL if block.not_run is not None)  # a reason
    assert len(RUNNABLE) >= 30
    assert {Path(b.page).name for b in RUNNABLE} >= {"python-api.md", "sql.md", "cli.md"}


class Base(DeclarativeBase):
    pass


class Document(Base):
    __tablename__ = "documents"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    body: Mapped[str | None] = mapped_column(Text)
    title: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


def load_tables(dsn: str) -> None:
    """documents and notes, ids 1..60 but 7 (an ORM example adds it), every even row a near
    copy of the odd one before it; titles and update times for --show and survivors."""
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


def build_world(dsn: str) -> None:
    simindex.create_index(
        dsn, "docs_body", table="documents", column="body", method=simindex.SimHash(max_distance=3)
    ).build()
    simindex.create_index(
        dsn,
        "notes",
        table="notes",
        column="body",
        method=simindex.MinHash(threshold=0.8, num_perm=128),
    ).build()


def _admin(server: Server) -> psycopg.Connection[Any]:
    return psycopg.connect(server.dsn, autocommit=True)


def _drop(server: Server, name: str) -> None:
    with _admin(server) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def _copy(server: Server, name: str, template: str) -> str:
    _drop(server, name)
    with _admin(server) as admin:
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template)
            )
        )
    return make_conninfo(server.dsn, dbname=name)


@pytest.fixture(scope="module")
def templates(postgres_server: Server, template_dsn: str) -> Iterator[dict[str, str]]:
    """The databases the blocks' databases are copied from, one per ``given`` database."""
    made = {}
    for given in DATABASES:
        name = f"docs_{given}"
        dsn = _copy(postgres_server, name, TEMPLATE)
        load_tables(dsn)
        if given == "world":
            build_world(dsn)
        dispose_engines()  # a pooled connection would keep the template from being copied
        made[given] = name
    yield made
    for name in made.values():
        _drop(postgres_server, name)


_numbers = iter(range(1, 1_000_000))


@pytest.fixture
def myapp() -> Iterator[None]:
    """The module of the tokenizer example (``myapp.text.tokens``)."""
    package, module = types.ModuleType("myapp"), types.ModuleType("myapp.text")
    module.tokens = str.split  # type: ignore[attr-defined]
    package.text = module  # type: ignore[attr-defined]
    sys.modules |= {"myapp": package, "myapp.text": module}
    yield
    del sys.modules["myapp"], sys.modules["myapp.text"]


@contextlib.contextmanager
def roles(code: str, dsn: str) -> Iterator[None]:
    """The login roles a block grants rights to, made for it and dropped after it."""
    made = re.findall(r"simindex grant (\w+)", code)
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


def run_python(block: Block, namespace: dict[str, Any], engine: Engine) -> None:
    compiled = compile(block.code, f"{block.page}:{block.line}", "exec")
    if "follow=True" in block.code:  # a worker that runs until SIGTERM: send it one
        timer = after(1.5, lambda: os.kill(os.getpid(), signal.SIGTERM))
        try:
            exec(compiled, namespace)  # the page's own code
        finally:
            timer.cancel()
    elif block.context == "alembic --sql":
        buffer = io.StringIO()
        context = MigrationContext.configure(
            dialect_name="postgresql", opts={"as_sql": True, "output_buffer": buffer}
        )
        with Operations.context(context):
            exec(compiled, namespace)
        assert "CREATE" in buffer.getvalue()
    elif block.context == "alembic":
        with (
            engine.begin() as connection,
            Operations.context(MigrationContext.configure(connection)),
        ):
            exec(compiled, namespace)
    else:
        exec(compiled, namespace)


def run_shell(code: str, dsn: str, directory: Path) -> None:
    shim = directory / "bin" / "simindex"
    shim.parent.mkdir(exist_ok=True)
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m simindex "$@"\n')
    shim.chmod(0o755)
    parts = conninfo_to_dict(dsn)
    env = os.environ | {
        "SIMINDEX_DSN": dsn,
        "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}",
        **{f"PG{key.upper()}": str(parts[key]) for key in ("host", "port", "user") if key in parts},
        **({"PGDATABASE": str(parts["dbname"])} if "dbname" in parts else {}),
        **({"PGPASSWORD": str(parts["password"])} if "password" in parts else {}),
    }
    for line in code.replace("\\\n", " ").splitlines():
        if not line.strip():
            continue
        words = plain_simindex(line)
        if words is not None:  # what bash would run: the command, with these words
            result = run_simindex(words, env=env, cwd=directory, timeout=60)
            assert result.returncode == 0, f"{line}\n{result.stdout}\n{result.stderr}"
            continue
        process = subprocess.Popen(
            ["bash", "-c", line],
            cwd=directory,
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        head = ""
        if "--follow" in line:  # runs until SIGTERM; the docs say it then exits 0
            head = _until_following(process)
            process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, f"{line}\n{out}\n{head}{err}"


# What would make bash do more than run one command with the words as shlex reads them.
_SHELL = re.compile(r"[$`\\*?~{}\[\]!]")


def plain_simindex(line: str) -> list[str] | None:
    """The arguments of a line that only runs ``simindex`` with fixed words (run by
    :func:`tests.commands.run_simindex`); None for a line bash must read: a pipe, a
    redirection, ``||``, an expansion, a worker that follows the queue."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:  # an unclosed quote: bash says what is wrong
        return None
    if not words or words[0] != "simindex" or "--follow" in words:
        return None
    if any(set(word) <= set(lexer.punctuation_chars) or _SHELL.search(word) for word in words):
        return None
    return words[1:]


def _until_following(process: subprocess.Popen[str]) -> str:
    """The worker's stderr up to its notice that it follows the queue (its signal handlers
    are in place by then), read within a minute: a timer would race a slow start."""
    assert process.stderr is not None
    timer = after(60.0, process.kill)
    read = ""
    try:
        for line in process.stderr:
            read += line
            if "following" in line:
                return read
    finally:
        timer.cancel()
    return read


def run_sql(code: str, dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        for statement in filter(str.strip, code.split(";\n")):
            conn.execute(statement.encode())
        conn.rollback()  # a DELETE example leaves nothing behind


@pytest.mark.parametrize("block", RUNNABLE, ids=[f"{b.page}:{b.line}" for b in RUNNABLE])
def test_block_runs_as_written(
    block: Block,
    postgres_server: Server,
    templates: dict[str, str],
    tmp_path: Path,
    myapp: None,
) -> None:
    name = f"docs_block_{next(_numbers)}"
    dsn = _copy(postgres_server, name, templates[block.database])
    engine = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(dsn))
    texts = [BASE.format(n) for n in range(3)] + [TWIN.format(0)]
    namespace: dict[str, Any] = {
        "engine": engine,
        "simindex": simindex,
        "select": select,
        "Document": Document,
        "text": texts[0],
        "text_a": texts[0],
        "text_b": texts[3],
        "texts": texts,
        "idf": {"quick": 2.0, "fox": 3.0},
    }
    if block.database == "world":
        namespace |= {
            "idx": simindex.get_index(engine, "docs_body"),
            "notes": simindex.get_index(engine, "notes"),
        }
    if "clustered" in block.given:
        namespace["idx"].clusters()
    if block.context is not None:
        namespace |= {"op": op, "CreateSimindexOp": simindex.alembic.CreateSimindexOp}
    try:
        with Session(engine) as session:
            namespace["session"] = session
            if block.language == "python":
                run_python(block, namespace, engine)
            elif block.language == "sql":
                run_sql(block.code, dsn)
            else:
                with roles(block.code, dsn):
                    run_shell(block.code, dsn, tmp_path)
    finally:
        engine.dispose()
        dispose_engines()
        _drop(postgres_server, name)
