"""Index an ORM session's writes inside its own transaction (opt-in).

Without this, the triggers queue every written key and a worker (:func:`simindex.sync`)
indexes it after the commit. With a tracked session, the commit first brings the index rows of
the keys *this transaction* queued up to date and consumes their entries, on the
session's connection and before the COMMIT: a query right after the commit sees the new
fingerprints, and the worker finds nothing of this transaction left to do.

It reads and fingerprints the rows as a worker would (:func:`simindex.ops.batch.prepare`), in
the session's transaction, and writes them through the index's ``<name>_index_own_v1``, which
writes (as simindex's owner role) only keys whose inbox entries this transaction wrote, and
refuses any other; it holds their queue entries until the commit, so no worker writes them
from an older version meanwhile. What stays for the worker:

* an index being built or dropped while the session commits (its entries stay queued);
* an index that keeps ``leader`` clusters (each row joins its nearest cluster: the worker's);
* entries queued inside a savepoint of a REPEATABLE READ or SERIALIZABLE transaction;
* keys another transaction queued; a tracked commit never takes those.

The session's database role needs the writer right on the index (``simindex grant ROLE
--writer [--index NAME]``): EXECUTE on that function, and no right on simindex's tables. An
index it may not serve, or whose source drifted, is left to the worker; the commit goes on.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb
from sqlalchemy import event
from sqlalchemy.orm import Session, scoped_session, sessionmaker

from simindex.core import validators
from simindex.db.catalog import DEFAULT_SCHEMA, catalog, check_schema
from simindex.db.connection import PgConnection, pinned
from simindex.db.pg_array import key_array
from simindex.db.statements import statement
from simindex.db.triggers import inbox_and_queue
from simindex.errors import IndexNotFoundError, IndexNotReadyError, SourceChangedError
from simindex.ops.batch import DEFAULT_MAX_TEXT_BYTES, prepare
from simindex.ops.queue import Target, load_target

Tracked = TypeVar(
    "Tracked", bound="Session | sessionmaker[Any] | scoped_session[Any] | type[Session]"
)

_log = logging.getLogger("simindex")
_listeners: weakref.WeakKeyDictionary[Any, _Listener] = weakref.WeakKeyDictionary()


class _Listener:
    """The ``before_commit`` hook of one tracked target."""

    __slots__ = ("__weakref__", "max_text_bytes", "schema")  # SQLAlchemy holds listeners weakly

    def __init__(self, schema: str, max_text_bytes: int) -> None:
        self.schema = schema
        self.max_text_bytes = max_text_bytes

    def __call__(self, session: Session) -> None:
        if session.in_nested_transaction():
            return  # a savepoint: the outer commit does it, once
        session.flush()  # before_commit comes before commit's own flush
        index_changes(
            session.connection().connection.driver_connection,
            index_schema=self.schema,
            max_text_bytes=self.max_text_bytes,
        )


def track(
    target: Tracked,
    *,
    index_schema: str = DEFAULT_SCHEMA,
    max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES,
) -> Tracked:
    """Index what sessions of ``target`` write before each of their commits; returns ``target``.

    Parameters:
        target: a Session, a sessionmaker, a scoped_session or a Session class (every session
            it makes, or every instance of the class, is tracked).
        index_schema: the schema simindex was migrated into.
        max_text_bytes: texts longer than this become failed items instead of being read, as in
            :func:`simindex.sync`.

    Tracking a target again with the same arguments changes nothing; with other arguments it
    raises ValueError (call :func:`untrack` first).
    """
    check_schema(index_schema)
    if max_text_bytes is None:
        raise ValueError("max_text_bytes must be a non-negative int, got None")
    validators.text_bytes(max_text_bytes)
    _check_target(target)
    existing = _listeners.get(target)
    if existing is not None:
        if (existing.schema, existing.max_text_bytes) != (index_schema, max_text_bytes):
            raise ValueError(
                f"{target!r} is tracked with index_schema={existing.schema!r}, "
                f"max_text_bytes={existing.max_text_bytes}; untrack it first"
            )
        return target
    listener = _Listener(index_schema, max_text_bytes)
    event.listen(target, "before_commit", listener)
    _listeners[target] = listener
    return target


def untrack(target: Session | sessionmaker[Any] | scoped_session[Any] | type[Session]) -> None:
    """Stop tracking ``target`` (nothing happens if it is not tracked)."""
    listener = _listeners.pop(target, None)
    if listener is not None:
        event.remove(target, "before_commit", listener)


def is_tracked(target: Session | sessionmaker[Any] | scoped_session[Any] | type[Session]) -> bool:
    """Whether :func:`track` registered ``target`` itself."""
    return target in _listeners


def index_changes(
    conn: object,
    *,
    index_schema: str = DEFAULT_SCHEMA,
    max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES,
) -> int:
    """Index the keys this transaction queued, in it, and consume their entries; how many.

    ``conn`` is the psycopg connection of the transaction (for a SQLAlchemy Connection:
    ``connection.connection.driver_connection``). Nothing is committed here.
    """
    if not isinstance(conn, psycopg.Connection):
        raise TypeError(f"simindex needs the psycopg (version 3) driver, got {type(conn).__name__}")
    pg: PgConnection = conn
    with pinned(pg):  # the app's next statement sees its own search_path again
        return _index_changes(pg, index_schema, max_text_bytes)


def _index_changes(pg: PgConnection, index_schema: str, max_text_bytes: int) -> int:
    if not _scalar(pg, statement("session_wrote")):
        return 0  # nothing written: no trigger fired
    regclass = sql.Identifier(index_schema, "indexes").as_string(pg)
    try:
        with pg.transaction():  # a savepoint: a role without the writer right commits anyway
            if not _scalar(pg, statement("session_catalog_exists"), {"catalog": regclass}):
                return 0  # simindex is not migrated into this database
            names = [
                str(name)
                for (name,) in pg.execute(statement("catalog_list", catalog=catalog(index_schema)))
            ]
    except psycopg.errors.InsufficientPrivilege as exc:
        _log.warning(
            "simindex: this session's role may not index its writes (simindex grant ROLE "
            "--writer); the sync worker will: %s",
            exc,
        )
        return 0
    taken = 0
    for name in names:
        inbox, _ = inbox_and_queue(index_schema, name)
        try:
            with pg.transaction():  # a savepoint: whatever fails, the app's commit goes on
                if not pg.execute(statement("session_has_own_keys", inbox=inbox)).fetchone():
                    continue  # nothing of this transaction's: leave the index and table alone
                target = load_target(pg, index_schema, name)
                if target is None:
                    continue  # being built or dropped: the worker takes the entries afterwards
                if target.leader_clusters is not None:
                    continue  # each row joins its nearest leader cluster: the worker's part
                own = pg.execute(statement("session_own_keys", inbox=target.triggers.inbox))
                keys = [key for (key,) in own]
                if keys:
                    taken += _index_own(pg, target, keys, max_text_bytes)
        except IndexNotFoundError:
            continue  # dropped since the list was read
        except (IndexNotReadyError, SourceChangedError, psycopg.Error) as exc:
            # Drifted, changed meanwhile, or no right to it: the worker sees to the entries.
            _log.warning("simindex: left index %s to the sync worker: %s", name, exc)
    return taken


def _index_own(pg: PgConnection, target: Target, keys: list[Any], max_text_bytes: int) -> int:
    """Read and fingerprint the rows of ``keys`` (this transaction's entries, in their text
    form) as a worker would, and write them through the index's ``<name>_index_own_v1``: the
    writer right writes no table of simindex's itself, and the function refuses a key this
    transaction did not change."""
    ready = prepare(pg, target, keys, max_text_bytes=max_text_bytes)
    row = pg.execute(
        statement(
            "session_index_own",
            function=target.triggers.own_function,
            key_type=target.triggers.key_type,
        ),
        {
            "remove": key_array(pg, ready.remove + ready.unread),
            "written": Jsonb(target.store.json_rows(ready.keys, ready.values)),
            "failures": Jsonb([{"key": key, "error": error} for key, error in ready.failures]),
        },
    ).fetchone()
    return len(keys) if row is None else int(row[0])


def _scalar(conn: PgConnection, query: sql.Composed, params: dict[str, Any] | None = None) -> Any:
    row = conn.execute(query, params).fetchone()
    assert row is not None
    return row[0]


def _check_target(target: object) -> None:
    if isinstance(target, (Session, sessionmaker, scoped_session)):
        return
    if isinstance(target, type) and issubclass(target, Session):
        return
    raise TypeError(
        "track() takes a Session, a sessionmaker, a scoped_session or a Session class, "
        f"got {type(target).__name__}"
    )
