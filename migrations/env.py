"""The Alembic environment for simindex's own schema.

Online, it migrates only the connection that ``simindex.migrate`` hands over in
``config.attributes["connection"]``, in that connection's transaction (never committing it).
Offline (``--sql``), it writes the script for PostgreSQL. The schema comes from
``config.attributes["schema"]``, else ``-x schema=...``, else ``simindex``; the version table
``alembic_version`` lives inside it.

Before Alembic looks at its version table, the transaction takes an advisory lock keyed on the
schema name, so concurrent migrations run one after another, the later ones finding the work
done; only then is the schema created if missing (concurrent ``CREATE SCHEMA IF NOT EXISTS``
can fail on a unique violation).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from alembic import context
from sqlalchemy import MetaData, text
from sqlalchemy.engine import Connection
from sqlalchemy.schema import CreateSchema

from simindex.db.catalog import DEFAULT_SCHEMA, check_schema
from simindex.db.catalog_table import catalog_table
from simindex.db.schema import lock_key
from simindex.errors import SimindexError

# bit_count(bigint), which SimHash queries use, arrived in PostgreSQL 14.
MIN_SERVER_VERSION = (14,)

config = context.config


def target_schema() -> str:
    schema = config.attributes.get("schema")
    if schema is None:
        schema = context.get_x_argument(as_dictionary=True).get("schema", DEFAULT_SCHEMA)
    return check_schema(schema)


def options(schema: str) -> dict[str, Any]:
    """What both modes tell Alembic: the schema, its version table, and what to compare."""
    return {
        "version_table_schema": schema,
        "target_metadata": target_metadata(schema),
        "include_schemas": True,
        "include_name": only_schema(schema),
        "compare_server_default": True,
    }


def run_offline(schema: str) -> None:
    context.configure(dialect_name="postgresql", literal_binds=True, **options(schema))
    with context.begin_transaction():
        context.execute(f"SELECT pg_advisory_xact_lock({lock_key(schema)})")
        context.execute(CreateSchema(schema, if_not_exists=True))
        context.run_migrations()


def run_online(connection: Connection, schema: str) -> None:
    version = connection.dialect.server_version_info
    if version is not None and version < MIN_SERVER_VERSION:
        raise SimindexError(
            f"simindex needs PostgreSQL {MIN_SERVER_VERSION[0]} or later, "
            f"the server is {'.'.join(map(str, version))}"
        )
    # The first statement begins the transaction if the caller has not: Alembic then sees a
    # transaction it does not own and leaves committing to whoever does.
    connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": lock_key(schema)})
    connection.execute(CreateSchema(schema, if_not_exists=True))
    context.configure(connection=connection, **options(schema))
    with context.begin_transaction():
        context.run_migrations()


def target_metadata(schema: str) -> MetaData:
    """What ``alembic revision --autogenerate`` compares the database with: the live catalog."""
    return catalog_table(MetaData(), schema).metadata


def only_schema(schema: str) -> Callable[[str | None, str, object], bool]:
    """Confines autogenerate to ``schema``: the application's tables are none of its business."""

    def include_name(name: str | None, type_: str, parent_names: object) -> bool:
        return name == schema if type_ == "schema" else True

    return include_name


def main() -> None:
    schema = target_schema()
    if context.is_offline_mode():
        run_offline(schema)
        return
    connection = config.attributes.get("connection")
    if not isinstance(connection, Connection):
        raise SimindexError(
            "simindex migrates only through simindex.migrate(...), which passes a connection; "
            "the alembic command line can write the SQL with --sql"
        )
    run_online(connection, schema)


main()
