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
    quoted = ".".join('"' + part.replace('"', '""') + '"' for part in (schema, table))
    return statement(
        "query_swap_guard",
        table=sql.Identifier(schema, table),
        table_name=sql.Literal(quoted),
        function=function,
        arguments=sql.SQL(", ").join(sql.SQL(f"${n}") for n in range(1, arguments + 1)),
        index_name=sql.Literal(index_name),
    )
