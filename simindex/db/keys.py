"""Keys in answers: any value PostgreSQL can store, including those psycopg cannot load.

psycopg turns a ``date``, ``timestamp``, ``timestamptz`` or ``time`` into a Python value, and
fails on the ones Python has none for: ``infinity`` and ``-infinity``, BC dates, years past
9999, the time ``24:00``. A query that meets one such key would fail as a whole. The cursors
simindex reads keys with (:func:`key_cursor`, :func:`install`) load those values as their
text form (a ``str`` PostgreSQL's input function reads back: ``'infinity'``,
``'0044-03-15 BC'``) and every other value as psycopg does. The loaders are the cursor's own:
a caller's connection, and its other cursors, keep their adapters.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.adapt import AdaptersMap, Buffer
from psycopg.types.datetime import DateLoader, TimeLoader, TimestampLoader, TimestamptzLoader

from simindex.db.connection import PgConnection


class _DateOrText(DateLoader):
    def load(self, data: Buffer) -> Any:
        try:
            return super().load(data)
        except psycopg.DataError:
            return bytes(data).decode()


class _TimestampOrText(TimestampLoader):
    def load(self, data: Buffer) -> Any:
        try:
            return super().load(data)
        except psycopg.DataError:
            return bytes(data).decode()


class _TimestamptzOrText(TimestamptzLoader):
    def load(self, data: Buffer) -> Any:
        try:
            return super().load(data)
        except psycopg.DataError:
            return bytes(data).decode()


class _TimeOrText(TimeLoader):
    def load(self, data: Buffer) -> Any:
        try:
            return super().load(data)
        except psycopg.DataError:
            return bytes(data).decode()


_LOADERS = (
    ("date", _DateOrText),
    ("timestamp", _TimestampOrText),
    ("timestamptz", _TimestamptzOrText),
    ("time", _TimeOrText),
)


def install(adapters: AdaptersMap) -> None:
    """The text-form fallback loaders on ``adapters`` (a cursor's: see the module)."""
    for name, loader in _LOADERS:
        adapters.register_loader(name, loader)


# Key types psycopg loads every value of, as the catalog names them (format_type, its typmod
# cut off): a cursor for keys of these needs no loaders of its own.
_LOADABLE = frozenset(
    ("smallint", "integer", "bigint", "text", "character varying", "character", "uuid", "numeric")
)


def key_cursor(conn: PgConnection, key_type: str | None = None) -> psycopg.Cursor[Any]:
    """A cursor of ``conn`` that loads every key (see the module); the connection's own
    adapters are left as they are. ``key_type``: the keys' stored type as the catalog names
    it; one psycopg loads every value of spares the query the loaders (None: installed)."""
    cursor = conn.cursor()
    if key_type is None or key_type.split("(")[0] not in _LOADABLE:
        install(cursor.adapters)
    return cursor
