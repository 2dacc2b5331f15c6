"""An index's catalog entry kept between queries, and the statement that checks it.

Reading an entry costs several statements; a query must not pay them each time. A
:class:`KeptEntry` keeps the catalog row and store it read, with the row's identity and
version (its id and ``xmin``: any change of the row, a build, a state, a drop and create
again, changes one of them), and checks them before each use: alone (``catalog_token``, one
short prepared statement), or inside the query itself (``facade_by_key``, ``facade_checked``),
which returns them beside the answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from simindex.db.catalog import IndexInfo, Store, catalog, ready_index
from simindex.db.connection import PgConnection, pinned
from simindex.db.keys import key_cursor
from simindex.db.simhash_store import SimHashStore
from simindex.db.statements import statement
from simindex.errors import IndexNotFoundError


@dataclass(frozen=True, slots=True)
class Entry:
    """A catalog entry as read: the row's (id, xmin), the row and the index's store."""

    token: tuple[Any, ...]
    info: IndexInfo
    store: Store


Query = tuple[Callable[[], sql.Composed], sql.Composable, dict[str, Any]]
"""A query of an index's SQL functions: its statement (composed only when no kept one is at
hand: composing costs more than the rest of a call), its ORDER BY (of ``q.``'s columns, for
``facade_checked``) and its parameters."""


_KEPT_CURSORS = 16
"""Connections a :class:`KeptEntry` keeps a cursor for."""


class KeptEntry:
    """The catalog entry of index ``name``, read once and kept while its row is unchanged."""

    def __init__(self, schema: str, name: str) -> None:
        self.schema = schema
        self.name = name
        self.entry: Entry | None = None
        self._by_key: tuple[tuple[Any, ...], bytes] | None = None
        self._token: bytes | None = None
        self._checked: dict[str, tuple[tuple[Any, ...], bytes]] = {}
        self._cursors: dict[PgConnection, tuple[psycopg.Cursor[Any], str]] = {}

    def cursor(self, conn: PgConnection, entry: Entry) -> psycopg.Cursor[Any]:
        """A cursor of ``conn`` for ``entry``'s queries (:func:`~simindex.db.keys.key_cursor`),
        kept for the next query on the same connection: a new cursor would look up again how
        to send each parameter and load each column (a tenth of a query by key). One a
        connection: a pool lends its connections in turn (first in, first out), and threads
        each borrow one. A pool lends a connection to one thread at a time, so a cursor is
        never shared by two. A key type changed since (a rebuilt index's) gets a new cursor: it
        loads keys of that type. At most :data:`_KEPT_CURSORS` are kept (all dropped when one
        more comes: a pool that size is rare, and a dropped one is made again)."""
        key_type = entry.info.source.key_type
        kept = self._cursors.get(conn)
        if kept is not None and kept[1] == key_type and not kept[0].closed:
            return kept[0]
        cursor = key_cursor(conn, key_type)
        if len(self._cursors) >= _KEPT_CURSORS:
            self._cursors.clear()
        self._cursors[conn] = (cursor, key_type)
        return cursor

    def ready(self, conn: PgConnection) -> Entry:
        """The entry, read again if its catalog row changed (one prepared statement when it
        did not, which may go out unpinned: see :meth:`token`; the entry is read again with
        the path pinned); IndexNotFoundError when there is no such index, IndexNotReadyError
        when it cannot answer."""
        token = self.token(conn)
        if token is None:
            self.entry = None
            raise IndexNotFoundError(f"no index named {self.name!r}")
        if self.entry is None or self.entry.token != token:
            with pinned(conn):
                info, store = ready_index(conn, self.schema, self.name)
            self.entry = Entry(token, info, store)
        return self.entry

    def token(self, conn: PgConnection) -> tuple[Any, ...] | None:
        """The catalog row's (id, xmin) now, None when there is no such index (one prepared
        statement, every name schema-qualified: it may be sent unpinned)."""
        if self._token is None:
            self._token = statement("catalog_token", catalog=catalog(self.schema)).as_bytes(conn)
        row = conn.execute(self._token, {"name": self.name}, prepare=True).fetchone()
        return None if row is None else tuple(row[:2])

    def by_key_statement(self, conn: PgConnection, entry: Entry) -> bytes:
        """``facade_by_key`` for ``entry``'s index: the query by key, the check of the entry
        and whether the key is in the index, in one statement (composed once per entry)."""
        if self._by_key is not None and self._by_key[0] == entry.token:
            return self._by_key[1]
        store = entry.store
        if isinstance(store, SimHashStore):
            function, measure = store.near_key_function, "distance"
        else:
            function, measure = store.similar_key_function, "similarity"
        text = statement(
            "facade_by_key",
            catalog=catalog(self.schema),
            table=store.table(),
            function=function,
            measure=sql.Identifier(measure),
        ).as_bytes(conn)
        self._by_key = (entry.token, text)
        return text

    def query(
        self, conn: PgConnection, kind: str, query: Callable[[Entry], Query | None]
    ) -> tuple[Entry, list[Any]]:
        """The entry and the rows of the statement ``query`` gives for it (None: no statement,
        no rows, as for a text without features), after the entry's check: in autocommit in
        the same statement (``facade_checked``, one round trip; composed once per entry and
        ``kind``), else one statement before it (a statement that fails in a caller's
        transaction would abort it). Every name those statements resolve is schema-qualified:
        ``conn`` may be on the caller's search_path."""
        entry = self.entry
        if entry is not None and conn.autocommit:
            made = query(entry)
            if made is None:
                return entry, []
            compose, order, params = made
            text = self._checked_statement(conn, entry, kind, compose, order)
            try:
                cursor = self.cursor(conn, entry)
                found = cursor.execute(text, {**params, "name": self.name}, prepare=True).fetchall()
            except psycopg.Error:  # the index was dropped meanwhile: read the catalog again
                found = []
            if found and tuple(found[0][:2]) == entry.token:
                return entry, [row[2:] for row in found if row[2] is not None]
        entry = self.ready(conn)
        made = query(entry)
        if made is None:
            return entry, []
        compose, _, params = made
        cursor = key_cursor(conn, entry.info.source.key_type)
        return entry, cursor.execute(compose(), params).fetchall()

    def _checked_statement(
        self,
        conn: PgConnection,
        entry: Entry,
        kind: str,
        compose: Callable[[], sql.Composed],
        order: sql.Composable,
    ) -> bytes:
        kept = self._checked.get(kind)
        if kept is not None and kept[0] == entry.token:
            return kept[1]
        text = statement(
            "facade_checked", catalog=catalog(self.schema), query=compose(), order=order
        ).as_bytes(conn)
        self._checked[kind] = (entry.token, text)
        return text
