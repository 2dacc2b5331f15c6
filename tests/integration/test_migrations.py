"""simindex's own migrations: the full cycle, other schemas, concurrency, and no drift."""

from __future__ import annotations

import io
import multiprocessing
import os
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote, urlencode

import psycopg
import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import TupleRow
from sqlalchemy import CheckConstraint, MetaData, create_engine, inspect
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.pool import QueuePool

import simindex
from simindex.db.catalog import DEFAULT_SCHEMA
from simindex.db.catalog_table import catalog_table
from simindex.db.connection import connect
from simindex.db.schema import (
    alembic_config,
    current_revision,
    downgrade,
    head_revision,
    lock_key,
    migrate,
)
from simindex.errors import SimindexError

ODD_SCHEMA = 'my "odd" schema.v2 ü'


def tables(dsn: str, schema: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'p')",
            (schema,),
        ).fetchall()
    return {name for (name,) in rows}


def schema_exists(dsn: str, schema: str) -> bool:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = %s)", (schema,)
        ).fetchone()
    assert row is not None
    return bool(row[0])


def version_rows(dsn: str, schema: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        query = sql.SQL("SELECT version_num FROM {}.alembic_version").format(sql.Identifier(schema))
        return [version for (version,) in conn.execute(query).fetchall()]


def drift(connection: Connection, schema: str) -> list[object]:
    """What autogenerate would change to make ``schema`` match simindex.db.catalog."""

    def include_name(name: str | None, type_: str, parent_names: object) -> bool:
        return name == schema if type_ == "schema" else True

    context = MigrationContext.configure(
        connection,
        opts={
            "include_schemas": True,
            "include_name": include_name,
            "version_table_schema": schema,
            "compare_type": True,
            "compare_server_default": True,
        },
    )
    return list(compare_metadata(context, catalog_table(MetaData(), schema).metadata))


# -- the template and the full cycle


def test_template_is_at_head(database_dsn: str) -> None:
    assert current_revision(database_dsn) == head_revision()
    assert tables(database_dsn, DEFAULT_SCHEMA) == {"alembic_version", "indexes"}


def test_upgrade_downgrade_upgrade(database_dsn: str) -> None:
    downgrade(database_dsn)
    assert current_revision(database_dsn) is None
    assert version_rows(database_dsn, DEFAULT_SCHEMA) == []
    # What stays is documented: the schema and Alembic's empty version table.
    assert tables(database_dsn, DEFAULT_SCHEMA) == {"alembic_version"}

    migrate(database_dsn)
    assert current_revision(database_dsn) == head_revision()
    assert version_rows(database_dsn, DEFAULT_SCHEMA) == [head_revision()]
    assert tables(database_dsn, DEFAULT_SCHEMA) == {"alembic_version", "indexes"}
    with connect(database_dsn) as connection:
        assert drift(connection, DEFAULT_SCHEMA) == []


def test_migrate_twice_changes_nothing(database_dsn: str) -> None:
    migrate(database_dsn)
    assert version_rows(database_dsn, DEFAULT_SCHEMA) == [head_revision()]


def test_migrate_creates_the_schema_on_an_empty_database(empty_database_dsn: str) -> None:
    assert not schema_exists(empty_database_dsn, DEFAULT_SCHEMA)
    assert current_revision(empty_database_dsn) is None
    migrate(empty_database_dsn)
    assert current_revision(empty_database_dsn) == head_revision()


# -- schemas


def test_a_schema_with_odd_characters(empty_database_dsn: str) -> None:
    migrate(empty_database_dsn, schema=ODD_SCHEMA)
    assert current_revision(empty_database_dsn, schema=ODD_SCHEMA) == head_revision()
    assert tables(empty_database_dsn, ODD_SCHEMA) == {"alembic_version", "indexes"}
    assert not schema_exists(empty_database_dsn, DEFAULT_SCHEMA)
    with connect(empty_database_dsn) as connection:
        assert drift(connection, ODD_SCHEMA) == []

    downgrade(empty_database_dsn, schema=ODD_SCHEMA)
    assert tables(empty_database_dsn, ODD_SCHEMA) == {"alembic_version"}


def test_another_schema_leaves_the_default_one_alone(database_dsn: str) -> None:
    migrate(database_dsn, schema="simindex_other")
    downgrade(database_dsn, schema="simindex_other")
    assert current_revision(database_dsn) == head_revision()
    assert tables(database_dsn, DEFAULT_SCHEMA) == {"alembic_version", "indexes"}


def test_the_apps_alembic_version_is_untouched(empty_database_dsn: str) -> None:
    with psycopg.connect(empty_database_dsn) as conn:
        # What an application's own Alembic leaves in the default schema.
        conn.execute(
            "CREATE TABLE public.alembic_version (version_num varchar(32) PRIMARY KEY); "
            "INSERT INTO public.alembic_version VALUES ('app_rev_7')"
        )
    migrate(empty_database_dsn)
    downgrade(empty_database_dsn)
    migrate(empty_database_dsn)
    assert version_rows(empty_database_dsn, "public") == ["app_rev_7"]
    assert version_rows(empty_database_dsn, DEFAULT_SCHEMA) == [head_revision()]


# -- concurrency


def advisory_lock_waiters(conn: psycopg.Connection[TupleRow]) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND wait_event_type = 'Lock' "
        "AND wait_event = 'advisory'"
    ).fetchone()
    assert row is not None
    return int(row[0])


def executor(kind: str) -> Executor:
    if kind == "threads":
        return ThreadPoolExecutor(max_workers=2)
    # Spawned, not forked: a fork would copy the parent's open connections and threads.
    return ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn"))


@pytest.mark.parametrize("kind", ["threads", "processes"])
def test_concurrent_migrations_both_succeed(empty_database_dsn: str, kind: str) -> None:
    # Holding the migrations' lock lines both callers up behind it, so they really race once
    # it is released, instead of one finishing before the other starts.
    with psycopg.connect(empty_database_dsn, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (lock_key(),))
        with executor(kind) as pool:
            futures = [pool.submit(migrate, empty_database_dsn) for _ in range(2)]
            deadline = time.monotonic() + 60
            while advisory_lock_waiters(holder) < 2:
                assert time.monotonic() < deadline, "the migrations never waited for the lock"
                assert not any(future.done() for future in futures), [
                    future.exception() for future in futures
                ]
                time.sleep(0.01)
            holder.execute("SELECT pg_advisory_unlock(%s)", (lock_key(),))
            for future in futures:
                future.result(timeout=60)
    assert version_rows(empty_database_dsn, DEFAULT_SCHEMA) == [head_revision()]
    assert tables(empty_database_dsn, DEFAULT_SCHEMA) == {"alembic_version", "indexes"}


def test_concurrent_migrations_without_a_head_start(empty_database_dsn: str) -> None:
    start = threading.Barrier(4)

    def run() -> None:
        start.wait()
        migrate(empty_database_dsn)

    with ThreadPoolExecutor(max_workers=4) as pool:
        for future in [pool.submit(run) for _ in range(4)]:
            future.result(timeout=60)
    assert version_rows(empty_database_dsn, DEFAULT_SCHEMA) == [head_revision()]


# -- the schema the code expects


def test_no_drift_between_migrations_and_catalog(database_dsn: str) -> None:
    with connect(database_dsn) as connection:
        assert drift(connection, DEFAULT_SCHEMA) == []


def test_check_constraints_match_the_catalog(database_dsn: str) -> None:
    # Autogenerate does not compare CHECK constraints; their names at least must agree.
    expected = {
        constraint.name
        for constraint in catalog_table(MetaData(), DEFAULT_SCHEMA).constraints
        if isinstance(constraint, CheckConstraint)
    }
    with connect(database_dsn) as connection:
        found = inspect(connection).get_check_constraints("indexes", schema=DEFAULT_SCHEMA)
    assert {constraint["name"] for constraint in found} == expected


def test_the_catalog_fills_its_defaults_and_checks_its_values(database_dsn: str) -> None:
    indexes = catalog_table(MetaData())
    row = {
        "name": "docs_body",
        "source_schema": "public",
        "source_table": "documents",
        "key_column": "id",
        "key_type": "bigint",
        "text_column": "body",
        "method": "simhash",
        "spec": {"method": "simhash"},
        "spec_version": 1,
    }
    with connect(database_dsn) as connection:
        inserted = connection.execute(indexes.insert().values(row).returning(indexes)).one()
        assert inserted.id >= 1
        assert (inserted.state, inserted.row_count, inserted.skipped_count) == ("created", 0, 0)
        assert inserted.built_at is None
        assert inserted.created_at is not None
        for bad in ({"name": ""}, {"method": "lsh"}, {"state": "done"}, {"spec": [1]}):
            with pytest.raises(IntegrityError), connection.begin_nested():
                connection.execute(indexes.insert().values({**row, "name": "x", **bad}))
        with pytest.raises(IntegrityError), connection.begin_nested():
            connection.execute(indexes.insert().values(row))  # the name is taken


def test_one_baseline_revision() -> None:
    # 0.1.0 is the first release: its schema is made by one revision, not by a history.
    script = ScriptDirectory.from_config(alembic_config())
    assert [revision.revision for revision in script.walk_revisions()] == ["0001"]
    assert script.get_bases() == script.get_heads() == [head_revision()] == ["0001"]


def test_the_offline_script_builds_the_same_schema(empty_database_dsn: str) -> None:
    output = io.StringIO()
    command.upgrade(alembic_config(schema=ODD_SCHEMA, output=output), "head", sql=True)
    with psycopg.connect(empty_database_dsn, autocommit=True) as conn:
        conn.execute(output.getvalue().encode())
    assert current_revision(empty_database_dsn, schema=ODD_SCHEMA) == head_revision()
    with connect(empty_database_dsn) as connection:
        assert drift(connection, ODD_SCHEMA) == []


# -- what migrate accepts


def sqlalchemy_url(dsn: str) -> URL:
    params = conninfo_to_dict(dsn)
    return URL.create(
        "postgresql+psycopg",
        username=str(params["user"]) if "user" in params else None,
        password=str(params["password"]) if "password" in params else None,
        database=str(params["dbname"]),
        # As query parameters, a socket directory reaches psycopg as it is.
        query={key: str(params[key]) for key in ("host", "port") if key in params},
    )


def libpq_uri(dsn: str) -> str:
    params = {key: str(value) for key, value in conninfo_to_dict(dsn).items()}
    user = quote(params.pop("user", ""), safe="")
    password = params.pop("password", None)
    credentials = user if password is None else f"{user}:{quote(password, safe='')}"
    dbname = quote(params.pop("dbname", ""), safe="")
    return f"postgresql://{credentials}@/{dbname}?{urlencode(params)}"


@contextmanager
def engine_for(dsn: str) -> Iterator[Engine]:
    engine = create_engine(sqlalchemy_url(dsn))
    try:
        yield engine
    finally:
        engine.dispose()


BINDS: dict[str, Callable[[str], str]] = {
    "libpq key=value": make_conninfo,
    "libpq uri": libpq_uri,
    "sqlalchemy url": lambda dsn: sqlalchemy_url(dsn).render_as_string(hide_password=False),
}


@pytest.mark.parametrize("kind", sorted(BINDS))
def test_migrate_from_a_string(empty_database_dsn: str, kind: str) -> None:
    migrate(BINDS[kind](empty_database_dsn))
    assert current_revision(empty_database_dsn) == head_revision()


def test_migrate_from_an_engine(empty_database_dsn: str) -> None:
    with engine_for(empty_database_dsn) as engine:
        migrate(engine)
        assert current_revision(engine) == head_revision()
        assert isinstance(engine.pool, QueuePool)
        assert engine.pool.checkedout() == 0  # the connection simindex took went back


def test_migrate_on_a_connection_runs_in_the_callers_transaction(empty_database_dsn: str) -> None:
    with engine_for(empty_database_dsn) as engine, engine.connect() as connection:
        migrate(connection)
        assert current_revision(connection) == head_revision()
        connection.rollback()
        assert current_revision(empty_database_dsn) is None

        with connection.begin():
            migrate(connection)
        assert current_revision(empty_database_dsn) == head_revision()


def test_simindex_exports_migrate() -> None:
    assert simindex.migrate is migrate


# -- refusals, before any connection is made

UNREACHABLE = "host=/nonexistent/simindex dbname=none"


@pytest.mark.parametrize(
    "schema", ["", "x" * 64, "é" * 32, "nul\0inside"], ids=["empty", "64", "64 bytes", "nul"]
)
def test_a_bad_schema_name_is_refused(schema: str) -> None:
    with pytest.raises(ValueError, match="schema must be a name of 1 to 63 bytes"):
        migrate(UNREACHABLE, schema=schema)
    with pytest.raises(ValueError, match="schema must be"):
        downgrade(UNREACHABLE, schema=schema)
    with pytest.raises(ValueError, match="schema must be"):
        current_revision(UNREACHABLE, schema=schema)


def test_a_schema_that_is_not_a_string_is_refused() -> None:
    with pytest.raises(TypeError, match="schema must be a str, got int"):
        migrate(UNREACHABLE, schema=7)  # type: ignore[arg-type]  # what mypy would catch


def test_the_longest_schema_name_is_accepted(empty_database_dsn: str) -> None:
    schema = "é" * 31 + "x"
    migrate(empty_database_dsn, schema=schema)
    assert current_revision(empty_database_dsn, schema=schema) == head_revision()


@pytest.mark.parametrize(
    "bind",
    ["", "   ", "mysql://app@db/app", "postgresql+psycopg2://app@db/app", "dbname"],
)
def test_a_bad_connection_string_is_refused(bind: str) -> None:
    with pytest.raises(ValueError, match=r"connection string|URL|psycopg 3"):
        migrate(bind)


def test_an_engine_on_another_driver_is_refused() -> None:
    engine = create_engine("sqlite://")
    with pytest.raises(ValueError, match="psycopg 3"):
        migrate(engine)


def test_the_alembic_command_line_cannot_migrate_online() -> None:
    with pytest.raises(SimindexError, match="--sql"):
        command.upgrade(alembic_config(), "head")


# -- packaging

ROOT = Path(__file__).parents[2]
# The installed dependencies, without this process's site setup (-S): no .pth file runs, so an
# editable install of simindex cannot lend it its migrations.
DEPENDENCIES = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
MIGRATE = """
import importlib.util, sys
import simindex
from simindex.db.schema import migrations_directory
simindex.migrate(sys.argv[1])
installed = importlib.util.find_spec("simindex.migrations") is not None
print(simindex.__file__, migrations_directory(), installed)
"""


def run_alone(path: Path, dsn: str, cwd: Path) -> list[str]:
    """Migrate ``dsn`` in a new interpreter that imports simindex from ``path`` only."""
    done = subprocess.run(
        [sys.executable, "-S", "-c", MIGRATE, dsn],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(path), *DEPENDENCIES])},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_a_source_checkout_migrates_without_installing(
    empty_database_dsn: str, tmp_path: Path
) -> None:
    package, directory, spec = run_alone(ROOT, empty_database_dsn, tmp_path)
    assert Path(package) == ROOT / "simindex" / "__init__.py"
    assert Path(directory) == ROOT / "migrations"
    assert spec == "False"  # simindex.migrations is not importable: the checkout's layout found
    assert current_revision(empty_database_dsn) == head_revision()


def test_the_wheel_ships_the_migrations(empty_database_dsn: str, tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for name in ("simindex", "migrations"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(tmp_path), str(source)], check=True)
    (wheel,) = tmp_path.glob("simindex-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        shipped = set(archive.namelist())
    expected = {
        "simindex/" + path.relative_to(ROOT).as_posix()
        for path in (ROOT / "migrations").rglob("*")
        if path.suffix in (".py", ".sql", ".mako")
    } | {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "simindex").rglob("*")
        if path.suffix in (".py", ".sql")
    }
    assert "simindex/migrations/versions/0001_baseline.sql" in expected
    assert sorted(expected - shipped) == []
    assert not [name for name in shipped if name.startswith("migrations/")]

    installed = tmp_path / "installed"
    subprocess.run([*pip, "install", "--no-deps", "-t", str(installed), str(wheel)], check=True)
    package, directory, spec = run_alone(installed, empty_database_dsn, tmp_path)
    assert Path(package) == installed / "simindex" / "__init__.py"
    assert Path(directory) == installed / "simindex" / "migrations"
    assert spec == "True"
    assert current_revision(empty_database_dsn) == head_revision()
