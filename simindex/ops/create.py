"""Create and drop an index: what is checked, and the statements that do it.

One path for every face: the facade (:func:`simindex.create_index`), the CLI and the Alembic
operations (``op.create_simindex``, which emits the statements through Alembic so that
``alembic upgrade --sql`` prints them) all call :func:`create_statements` and
:func:`drop_statements`, which check the source and the catalog and return what to run.
"""

from __future__ import annotations

from psycopg import sql

from simindex.core.spec import IndexSpec, Method, resolve
from simindex.db import objects
from simindex.db.catalog import check_name, check_schema, find_index
from simindex.db.connection import PgConnection
from simindex.db.source import check_owner, describe, row_count, row_estimate
from simindex.db.statements import run, statement
from simindex.db.triggers import event_triggers_on
from simindex.errors import IndexExistsError, IndexNotFoundError, SourceError


def checked_spec(method: Method) -> IndexSpec:
    """``method`` resolved and its tokenizer's version recorded: bad arguments fail before
    any database work."""
    return resolve(method).check_tokenizer()


def create_statements(
    conn: PgConnection,
    index_schema: str,
    name: str,
    table: str,
    column: str,
    method: Method,
    *,
    key: str | None = None,
    schema: str | None = None,
    key_type: str | None = None,
    size_to_table: bool = True,
) -> list[sql.Composed]:
    """The statements creating index ``name`` of ``table.column``, after checking the source
    (it exists, the caller owns it, its key column is ``key_type`` when given) and that no
    index has the name. With ``size_to_table``, a SimHash design is sized to the table's rows
    (the planner's count when the table was analyzed, else a real one); Alembic's operation
    does not, so that ``alembic upgrade --sql`` prints what an online upgrade runs (a build
    sizes the design to the rows it counts either way)."""
    check_schema(index_schema)
    check_name(name)
    method = checked_spec(method).method
    source = describe(conn, table, column, schema=schema, key=key)
    check_owner(conn, source)
    if key_type is not None:
        same = conn.execute(
            statement("source_same_type"),
            {"given": key_type, "found": source.key_type, "column": source.key_type_id},
        ).fetchone()
        if not (same and same[0]):
            raise SourceError(
                f"key_type {key_type!r} was given, but key column "
                f"{source.key_column!r} of {source.table} is {source.key_type}"
            )
    if size_to_table:
        rows = row_estimate(conn, source)
        spec = resolve(method, row_count(conn, source) if rows is None else rows)
    else:
        spec = resolve(method)
    if find_index(conn, index_schema, name) is not None:
        raise IndexExistsError(f"an index named {name!r} exists already")
    trusted = event_triggers_on(conn, index_schema)
    return objects.create_statements(index_schema, name, source, spec, trusted=trusted)


def create(
    conn: PgConnection,
    index_schema: str,
    name: str,
    table: str,
    column: str,
    method: Method,
    *,
    key: str | None = None,
    schema: str | None = None,
) -> None:
    """Create index ``name`` (see :func:`create_statements`)."""
    run(
        conn,
        create_statements(conn, index_schema, name, table, column, method, key=key, schema=schema),
    )


def drop_statements(
    conn: PgConnection, index_schema: str, name: str, *, missing_ok: bool = False
) -> list[sql.Composed]:
    """The statements dropping index ``name`` as the catalog describes it; none for a missing
    index with ``missing_ok``, else IndexNotFoundError."""
    check_schema(index_schema)
    row = find_index(conn, index_schema, name)
    if row is None:
        if missing_ok:
            return []
        raise IndexNotFoundError(f"no index named {name!r}")
    return objects.drop_statements(index_schema, name, row.source, row.spec)


def drop(conn: PgConnection, index_schema: str, name: str, *, missing_ok: bool = False) -> None:
    """Drop index ``name``: its side tables, functions, queue, triggers and catalog row."""
    run(conn, drop_statements(conn, index_schema, name, missing_ok=missing_ok))
