"""What an index may answer a role: never more rows than a bound by default, and never a key
of a row the role could not SELECT from the source table.

Every table of simindex's that holds keys of a source (side tables, queue, failed items,
clusters) has row-level security: a role sees a row only when a primary-key probe of the
source, run with the role's own rights, finds the key (``<name>_visible_v1``), so the source's
privileges and RLS policies reach every query path: the SQL functions (SECURITY INVOKER),
Python, SQLAlchemy, pairs, clusters and anyone reading the tables. Roles that may write them
(workers, admins) and simindex's owner role see every row.

Every query function a reader may call returns at most :data:`DEFAULT_MAX_ROWS` rows unless
the caller asks for more (``max_rows``; NULL is every row). Its cost is governed by the
caller's own ``work_mem``, ``statement_timeout`` and ``temp_file_limit``: no function sets
them. ``pairs`` (quadratic in a group of identical rows) is not a reader's right.
"""

from __future__ import annotations

from collections.abc import Sequence

from psycopg import sql

from simindex.db.connection import PgConnection
from simindex.db.privileges import OWNER
from simindex.db.source import Source
from simindex.db.statements import statement

DEFAULT_MAX_ROWS = 1000
"""The default ``max_rows`` of the SQL query functions."""


def max_rows() -> sql.Literal:
    return sql.Literal(DEFAULT_MAX_ROWS)


def visible_function(schema: str, name: str) -> sql.Identifier:
    """``<name>_visible_v1(key)``: whether the caller sees the source row of ``key``."""
    return sql.Identifier(schema, f"{name}_visible_v1")


def visible_key_function(schema: str, name: str) -> sql.Identifier:
    """``<name>_visible_key_v1(key)``: ``key`` when the caller sees its source row, no row
    otherwise; inlined into the query that calls it (a probe in that query's plan)."""
    return sql.Identifier(schema, f"{name}_visible_key_v1")


def visible_statements(schema: str, name: str, source: Source) -> list[sql.Composed]:
    """The probe functions, for the source as it is now (``CREATE OR REPLACE``: the policies
    and query functions that call them stay)."""
    return [
        statement(
            "answers_visible_function",
            function=visible_function(schema, name),
            key_function=visible_key_function(schema, name),
            # format_type output from the catalog: a type name PostgreSQL itself quoted.
            key_type=sql.SQL(source.key_type),
            source=source.identifier,
            key=sql.Identifier(source.key_column),
        )
    ]


def visible_is_stale(conn: PgConnection, schema: str, name: str, source: Source) -> bool:
    """Whether the probe function no longer names ``source`` as it is now and the caller may
    write it again as the owner role. Without event triggers (they may be disabled) a rename
    of the table or its key is written into it only by a build, or by a worker that sees it."""
    function = visible_function(schema, name)
    signature = sql.SQL("{}({})").format(function, sql.SQL(source.key_type)).as_string(conn)
    table = source.identifier.as_string(conn)
    row = conn.execute(
        statement("answers_visible_body"),
        {"signature": signature, "table": table, "key": source.key_column, "owner": OWNER},
    ).fetchone()
    assert row is not None
    body, relation, key, may_write = row
    if body is None or not may_write:
        return False
    ours = sql.SQL("{} AS s WHERE s.{} ").format(
        source.identifier, sql.Identifier(source.key_column)
    )
    theirs = f"{relation} AS s WHERE s.{key} "  # as follow_source_v1 writes it
    return ours.as_string(conn) not in body and theirs not in body


def protect_statements(
    schema: str, name: str, table: str, columns: Sequence[str] = ("key",)
) -> list[sql.Composed]:
    """Row-level security on ``table`` (of ``schema``): a row is seen when the caller sees the
    source rows of every one of ``columns`` (keys of the source)."""
    function = visible_function(schema, name)
    visible = sql.SQL(" AND ").join(
        sql.SQL("{}({})").format(function, sql.Identifier(column)) for column in columns
    )
    quoted = ".".join('"' + part.replace('"', '""') + '"' for part in (schema, table))
    return [
        statement(
            "answers_protect",
            table=sql.Identifier(schema, table),
            table_name=sql.Literal(quoted),
            visible=visible,
        )
    ]


def drop_statements(schema: str, name: str) -> list[sql.Composed]:
    """The probe functions go last, after the tables whose policies call them."""
    return [
        statement("drop_function", function=function)
        for function in (visible_key_function(schema, name), visible_function(schema, name))
    ]
