"""The connections the facade works on: the caller's transaction, or the pool's in autocommit
for queries; a missing simindex schema said as such."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from sqlalchemy.engine import Connection

from simindex.db.connection import (
    Bind,
    PgConnection,
    autocommit_connection,
    in_transaction,
    transaction,
)
from simindex.errors import SchemaNotMigratedError


@contextmanager
def session(bind: Bind, index_schema: str) -> Iterator[PgConnection]:
    """:func:`transaction`, with a missing simindex schema said as such."""
    try:
        with transaction(bind) as conn:
            yield conn
    except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName) as exc:
        raise unmigrated(exc, index_schema) from exc


@contextmanager
def reading(bind: Bind, index_schema: str, *, pin: bool = True) -> Iterator[PgConnection]:
    """A connection for queries: the caller's, in their transaction; else one from the pool
    in autocommit (each statement reads committed data; no BEGIN or COMMIT to wait for).
    ``pin=False``: a caller's connection on its own search_path, for statements that
    schema-qualify every name (the query by key; :func:`simindex.db.connection.pinned` for
    the others)."""
    if isinstance(bind, Connection):
        if pin:
            with session(bind, index_schema) as conn:
                yield conn
            return
        try:
            with in_transaction(bind) as conn:
                yield conn
        except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName) as exc:
            raise unmigrated(exc, index_schema) from exc
        return
    try:
        with autocommit_connection(bind, pin=pin) as conn:
            yield conn
    except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName) as exc:
        raise unmigrated(exc, index_schema) from exc


def unmigrated(exc: psycopg.Error, index_schema: str) -> Exception:
    missing = exc.diag.message_primary or ""
    if f'"{index_schema}"' in missing or f'"{index_schema}.indexes"' in missing:
        return SchemaNotMigratedError.of(index_schema)
    return exc
