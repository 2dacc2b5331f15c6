"""Create and upgrade simindex's own schema with Alembic.

simindex keeps everything in one schema (``simindex`` unless told otherwise) with its own
``alembic_version`` table inside it, so an application's Alembic history is never touched. The
migrations live in ``migrations/`` beside the package and ship inside it (``simindex.migrations``);
no ``alembic.ini`` is needed.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path
from typing import TextIO

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from psycopg import sql
from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from simindex.db.catalog import DEFAULT_SCHEMA, catalog, check_schema
from simindex.db.connection import connect
from simindex.db.statements import statement
from simindex.errors import SimindexError

MIGRATIONS_PACKAGE = "simindex.migrations"

_Command = Callable[[Config], None]
# Alembic runs env.py and the revisions through process-wide proxies (alembic.context,
# alembic.op), so only one thread at a time may run a command.
_ALEMBIC_IN_USE = threading.Lock()


def migrate(
    bind: Engine | Connection | str, *, schema: str = DEFAULT_SCHEMA, revision: str = "head"
) -> None:
    """Bring simindex's schema up to ``revision`` (the newest by default), creating it if needed.

    Safe to run concurrently, from threads or processes: a transaction-level advisory lock,
    keyed on the schema name, makes later callers wait and then find the work done.

    Parameters:
        bind: an Engine or a DSN string: simindex opens a connection and commits. A
            Connection: the migration runs in the caller's transaction, which the caller
            commits (it holds the lock until then).
        schema: the schema for simindex's tables and functions; always quoted, so any name
            PostgreSQL accepts (1 to 63 bytes).
        revision: an Alembic revision to stop at.

    At the newest revision it also finds again the columns of tables restored from a dump (see
    the README's "Backup and restore").
    """
    _run(bind, schema, lambda config: command.upgrade(config, revision))
    if revision == "head":
        with connect(bind) as connection:
            raw = connection.connection.driver_connection
            found = statement(
                "catalog_restored",
                follow=sql.Identifier(schema, "follow_source_v1"),
                catalog=catalog(schema),
            )
            connection.exec_driver_sql(found.as_string(raw))
            if not isinstance(bind, Connection):
                connection.commit()


def downgrade(
    bind: Engine | Connection | str, revision: str = "base", *, schema: str = DEFAULT_SCHEMA
) -> None:
    """Take simindex's schema down to ``revision``; ``"base"`` drops everything but the schema.

    The schema itself and its (then empty) ``alembic_version`` table stay, because Alembic
    records the downgrade there; ``DROP SCHEMA ... CASCADE`` removes them. Transactions as in
    :func:`migrate`.
    """
    _run(bind, schema, lambda config: command.downgrade(config, revision))


def current_revision(
    bind: Engine | Connection | str, *, schema: str = DEFAULT_SCHEMA
) -> str | None:
    """The revision simindex's schema is at, or None if it was never migrated."""
    check_schema(schema)
    with connect(bind) as connection:
        context = MigrationContext.configure(connection, opts={"version_table_schema": schema})
        return context.get_current_revision()


def head_revision() -> str:
    """The newest revision this release ships."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise SimindexError(f"no migrations found in {migrations_directory()}")
    return head


def lock_key(schema: str = DEFAULT_SCHEMA) -> int:
    """The ``pg_advisory_xact_lock`` key that migrations of ``schema`` hold.

    Derived from the schema name with a fixed hash (not ``hashtext``, whose values PostgreSQL
    does not promise to keep), so every release and every client agree on it.
    """
    digest = hashlib.blake2b(
        f"simindex migrations {check_schema(schema)}".encode(), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big", signed=True)


def migrations_directory() -> Path:
    """Where the migrations are, as a directory Alembic can read: ``simindex.migrations`` when
    installed (a wheel, or an editable install), else ``migrations/`` beside the ``simindex``
    package of a source checkout run as it is (``PYTHONPATH=.``)."""
    try:
        location = files(MIGRATIONS_PACKAGE)
    except ModuleNotFoundError:
        checkout = Path(__file__).resolve().parents[2] / "migrations"
        if not (checkout / "env.py").is_file():
            raise SimindexError(
                f"simindex's migrations are neither installed ({MIGRATIONS_PACKAGE}) nor in "
                f"{checkout}"
            ) from None
        return checkout
    if not isinstance(location, Path):
        raise SimindexError(
            f"the migrations must be files on disk for Alembic, got {location!r}: "
            "install simindex unzipped"
        )
    return location


def alembic_config(
    *,
    schema: str = DEFAULT_SCHEMA,
    connection: Connection | None = None,
    output: TextIO | None = None,
) -> Config:
    """An Alembic Config for simindex's migrations, built in code (no ``alembic.ini``).

    ``connection`` is what ``env.py`` migrates; without one only offline (``sql=True``) commands
    work, writing their SQL to ``output``.
    """
    attributes: dict[str, object] = {"schema": check_schema(schema)}
    if connection is not None:
        attributes["connection"] = connection
    config = Config(output_buffer=output, attributes=attributes)
    # ConfigParser interpolates %, which a directory name may contain.
    config.set_main_option("script_location", str(migrations_directory()).replace("%", "%%"))
    return config


def _run(bind: Engine | Connection | str, schema: str, command_for: _Command) -> None:
    check_schema(schema)
    with connect(bind) as connection:
        if isinstance(bind, Connection):
            _run_locked(connection, schema, command_for)
        else:
            with connection.begin():
                _run_locked(connection, schema, command_for)


def _run_locked(connection: Connection, schema: str, command_for: _Command) -> None:
    # env.py takes this lock too (for any caller of alembic_config); taking it first here
    # means a thread never waits for another session while holding _ALEMBIC_IN_USE.
    connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": lock_key(schema)})
    with _ALEMBIC_IN_USE:
        command_for(alembic_config(schema=schema, connection=connection))
