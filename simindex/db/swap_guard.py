"""The first statement of every query function: what makes a query that meets a rebuild's
swap answer from the rebuilt tables whole (or, in a transaction whose snapshot cannot move,
fail to be retried), never from an empty table. The reasoning is beside the SQL, in
``db/sql/common.sql`` (``query_swap_guard``)."""

from __future__ import annotations

from psycopg import sql

from simindex.db.statements import statement


def swap_guard(
    schema: str, table: str, function: sql.Identifier, arguments: int, index_name: str
) -> sql.Composed:
    """The guard of ``function`` (``arguments`` positional parameters) reading ``table`` of
    ``schema``."""
    return statement(
        "query_swap_guard",
        table=sql.Identifier(schema, table),
        table_name=quoted_name(schema, table),
        function=function,
        arguments=sql.SQL(", ").join(sql.SQL(f"${n}") for n in range(1, arguments + 1)),
        index_name=sql.Literal(index_name),
    )


def query_checks(schema: str, table: str, index_name: str) -> sql.Composed:
    """The checks of a query reading ``table`` of ``schema`` for ``index_name``: the swap
    guard and the dropped-source check in one catalog row, run once a call."""
    return statement(
        "query_checks",
        ready=sql.Identifier(schema, "query_ready_v1"),
        catalog=sql.Identifier(schema, "indexes"),
        index_name=sql.Literal(index_name),
        side_oid=sql.SQL("{}::pg_catalog.regclass::pg_catalog.oid").format(
            quoted_name(schema, table)
        ),
    )


def quoted_name(schema: str, table: str) -> sql.Literal:
    """``table`` of ``schema`` as a string literal of its quoted name (for a regclass cast)."""
    return sql.Literal(".".join('"' + part.replace('"', '""') + '"' for part in (schema, table)))
