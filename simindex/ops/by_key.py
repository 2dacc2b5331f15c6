"""A query by key: the neighbours of an indexed row, in one statement on the happy path.

The statement (``facade_by_key``) checks the kept catalog entry (:mod:`simindex.db.entry`),
runs the index's typed SQL function by key and says whether the key is in the index, all in
one round trip; only a key that is not is asked why, by a second statement (``key_state``:
its row queued and not synced yet, a failed item, the index broken).
On a pooled connection in autocommit that is the whole query; in a caller's transaction the
entry is checked first (a statement that fails there would abort the caller's transaction),
and so is a first query, which reads the entry. Both statements name every function, operator
and type with its schema, so the happy path sends them on the connection as the caller left
it, with no round trips to pin its ``search_path`` and set it back; everything else (reading
the entry) runs pinned. ``near_key`` (SimHash) and ``similar(key=...,
verify="estimate")`` (MinHash) both come here; the SQL functions themselves are the answer's
only source.
"""

from __future__ import annotations

from typing import Any, Literal

import psycopg

from simindex.core import validators
from simindex.core.spec import MinHash
from simindex.db.catalog import IndexInfo, catalog, store_of
from simindex.db.connection import PgConnection, pinned
from simindex.db.entry import Entry, KeptEntry
from simindex.db.simhash_store import SimHashStore
from simindex.db.source import check_key, key_errors
from simindex.db.statements import statement
from simindex.db.triggers import Triggers
from simindex.errors import IndexNotFoundError, KeyNotIndexedError

Measure = Literal["distance", "similarity"]

_INTEGER_TYPES = ("smallint", "integer", "bigint")
# A rebuild committed between the entry's check and the query: read the entry again, this
# many times at most.
_ATTEMPTS = 3


def by_key(
    conn: PgConnection,
    kept: KeptEntry,
    key: Any,
    *,
    measure: Measure,
    bound: float | None,
    limit: int | None,
) -> tuple[IndexInfo, list[Any]]:
    """The catalog entry and the rows of ``key``'s neighbours within ``bound`` (max_distance or
    threshold, default the index's), the nearest ``limit``: each row's first two columns are
    the key and the distance or similarity; KeyNotIndexedError saying why when the key is not
    in the index."""
    check_key(key)
    validators.limit(limit)
    entry = kept.entry
    if entry is not None:
        rows = _unpinned(conn, kept, entry, key, measure, bound, limit)
        if rows is not None:
            return entry.info, _answer(conn, entry.info, key, rows)
    with pinned(conn):
        for _ in range(_ATTEMPTS):
            entry = kept.ready(conn)
            with key_errors(entry.info.source, key):
                rows = _run(conn, kept, entry, key, measure, bound, limit)
            if rows is not None:
                return entry.info, _answer(conn, entry.info, key, rows)
    raise psycopg.errors.SerializationFailure(
        f"index {kept.name!r} was rebuilt {_ATTEMPTS} times during a query: try again"
    )


def _unpinned(
    conn: PgConnection,
    kept: KeptEntry,
    entry: Entry,
    key: Any,
    measure: Measure,
    bound: float | None,
    limit: int | None,
) -> list[Any] | None:
    """The happy path, on ``conn`` as it is (perhaps on a caller's search_path: the
    statements sent here schema-qualify every name): in autocommit ``facade_by_key`` alone,
    in a transaction after the entry's check. None when the entry must be read again."""
    if conn.autocommit:
        try:
            return _run(conn, kept, entry, key, measure, bound, limit)
        except psycopg.Error:  # the index was dropped meanwhile, or the key is of a wrong type
            return None
    if kept.token(conn) != entry.token:
        return None
    with key_errors(entry.info.source, key):
        return _run(conn, kept, entry, key, measure, bound, limit)


def _run(
    conn: PgConnection,
    kept: KeptEntry,
    entry: Entry,
    key: Any,
    measure: Measure,
    bound: float | None,
    limit: int | None,
) -> list[Any] | None:
    """The statement's rows; None when the catalog row is no longer ``entry``'s."""
    params: dict[str, Any] = {"name": kept.name, "key": key, "limit": limit}
    store = entry.store
    if isinstance(store, SimHashStore):
        if measure != "distance":
            raise TypeError(f"index {kept.name!r} is a SimHash index: use near_key()")
        params["bound"] = validators.distance(bound, store.design.max_distance)  # type: ignore[arg-type]
    else:
        if measure != "similarity":
            raise TypeError(f"index {kept.name!r} is a MinHash index: use similar(key=...)")
        method = entry.info.spec.method
        assert isinstance(method, MinHash)
        params["bound"] = validators.threshold(bound, method.threshold)
    text = kept.by_key_statement(conn, entry)
    rows = kept.cursor(conn, entry).execute(text, params, prepare=True).fetchall()
    # The last row is the entry's: (NULL, NULL, id, xmin, indexed).
    if not rows or (rows[-1][2], rows[-1][3]) != entry.token:
        return None
    return rows


def _answer(conn: PgConnection, info: IndexInfo, key: Any, rows: list[Any]) -> list[Any]:
    """``_run``'s rows of the answer; KeyNotIndexedError (or TypeError) saying why when the
    key is not in the index."""
    state = rows.pop()
    if not rows and not state[4]:
        raise why_not_indexed(conn, info, key)
    return rows


def not_indexed(
    info: IndexInfo, key: Any, *, queued: bool, error: str | None, broken: str | None
) -> KeyNotIndexedError | TypeError:
    """Why ``key`` is not in the index, from its state; a float for an integer key is a
    TypeError (PostgreSQL compares it as numeric and finds no row)."""
    if isinstance(key, float) and info.source.key_type in _INTEGER_TYPES:
        return TypeError(
            f"key {key!r} is a float, which does not fit the index's key type "
            f"{info.source.key_type}: give an int"
        )
    if error is not None:
        why = f"sync failed on its row: {error}; see `simindex sync --retry-failed`"
    elif queued:
        why = "its row is queued and not synced yet: run `simindex sync` or sync(engine)"
    else:
        why = "no such row, or its text is NULL, empty or punctuation only"
    if broken is not None:
        why += f"; the index is broken, the sync worker cannot sync it: {broken or 'unknown'}"
    return KeyNotIndexedError.of(info.name, key, why=why)


def why_not_indexed(
    conn: PgConnection, info: IndexInfo, key: Any
) -> KeyNotIndexedError | TypeError:
    """:func:`not_indexed`, the key's state read by one statement (``key_state``, every name
    schema-qualified: ``conn`` may be on a caller's search_path). IndexNotFoundError when the
    index was dropped since the query, whose statement it follows."""
    triggers = Triggers(info.index_schema, info.name, info.source, store_of(info))
    try:
        state = conn.execute(
            statement(
                "key_state",
                inbox=triggers.inbox,
                queue=triggers.queue,
                failed=triggers.failed,
                catalog=catalog(info.index_schema),
            ),
            {"key": key, "name": info.name},
        ).fetchone()
    except psycopg.errors.UndefinedTable as exc:  # its queue, inbox or failed items gone
        raise IndexNotFoundError(f"no index named {info.name!r}: dropped during the query") from exc
    queued, error, broken = state or (False, None, None)
    return not_indexed(info, key, queued=queued, error=error, broken=broken)
