"""The connections the facade works on: the caller's transaction, or the pool's in autocommit
for queries; a missing simindex schema said as such."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import psycopg
from sqlalchemy.engine import Connection, Engine

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


def reading(
    bind: Bind, index_schema: str, *, pin: bool = True
) -> AbstractContextManager[PgConnection]:
    """A connection for queries: the caller's, in their transaction; else one from the pool
    in autocommit (each statement reads committed data; no BEGIN or COMMIT to wait for).
    ``pin=False``: a caller's connection on its own search_path, for statements that
    schema-qualify every name (the query by key; :func:`simindex.db.connection.pinned` for
    the others)."""
    if isinstance(bind, Connection):
        return _in_callers_transaction(bind, index_schema, pin)
    return _Reading(bind, index_schema, pin)


@contextmanager
def _in_callers_transaction(
    bind: Connection, index_schema: str, pin: bool
) -> Iterator[PgConnection]:
    if pin:
        with session(bind, index_schema) as conn:
            yield conn
        return
    try:
        with in_transaction(bind) as conn:
            yield conn
    except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName) as exc:
        raise unmigrated(exc, index_schema) from exc


class _Reading:
    """A pooled connection in autocommit (:func:`autocommit_connection`), a missing simindex
    schema said as such: a class, as a query by key pays for each layer around it."""

    __slots__ = ("_index_schema", "_lent")

    def __init__(self, bind: Engine | str, index_schema: str, pin: bool) -> None:
        self._lent = autocommit_connection(bind, pin=pin)
        self._index_schema = index_schema

    def __enter__(self) -> PgConnection:
        try:
            return self._lent.__enter__()
        except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName) as exc:
            raise unmigrated(exc, self._index_schema) from exc

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: Any
    ) -> None:
        try:
            self._lent.__exit__(kind, error, traceback)
        except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName) as exc:
            raise unmigrated(exc, self._index_schema) from exc
        if isinstance(error, psycopg.errors.UndefinedTable | psycopg.errors.InvalidSchemaName):
            raise unmigrated(error, self._index_schema) from error


def unmigrated(exc: psycopg.Error, index_schema: str) -> Exception:
    missing = exc.diag.message_primary or ""
    if f'"{index_schema}"' in missing or f'"{index_schema}.indexes"' in missing:
        return SchemaNotMigratedError.of(index_schema)
    return exc
