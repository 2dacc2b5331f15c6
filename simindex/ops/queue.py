"""An index's queue, failed items and health as the sync worker sees them.

:class:`Target` is an index as a batch needs it (source, spec, store, queue); :func:`move`
fills the queue from the inbox the triggers append to; :func:`take` and
:func:`take_keys` remove queue entries (``FOR UPDATE SKIP LOCKED``, so any number of workers
share the work and never take the same key), :func:`fail` records failed items, :func:`note`
the index's health in the catalog. What a batch does with the keys it took is
:mod:`simindex.ops.batch`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from simindex.core.spec import IndexSpec
from simindex.db.answers import visible_is_stale, visible_statements
from simindex.db.catalog import (
    DEFAULT_SCHEMA,
    Health,
    catalog,
    find_index,
    lock_source,
    read_index,
    record_health,
    store_for,
)
from simindex.db.cluster_store import ClusterStore
from simindex.db.connection import Bind, PgConnection, transaction
from simindex.db.minhash_store import MinHashStore
from simindex.db.pg_array import key_array
from simindex.db.privileges import as_owner
from simindex.db.simhash_store import SimHashStore
from simindex.db.source import Source, lenient_keys, refuse_policies
from simindex.db.statements import run, statement
from simindex.db.triggers import BATCH_LOCK_CLASS, BUILD_LOCK_CLASS, Triggers, inbox_and_queue
from simindex.errors import IndexNotFoundError


@dataclass(frozen=True, slots=True)
class Target:
    """An index as a batch needs it: source, spec, side tables, queue."""

    name: str
    source: Source
    spec: IndexSpec
    store: SimHashStore | MinHashStore
    triggers: Triggers
    # Set while the index keeps leader clusters: each written row joins its nearest cluster.
    leader_clusters: ClusterStore | None = None
    # Whether the catalog marks the index broken: a batch that succeeds clears the mark.
    broken: bool = False


def follow_renames(conn: PgConnection, target: Target) -> None:
    """Write the index's probe function again when the source's table or key was renamed
    and no event trigger wrote it (they may be disabled): every answer is filtered through
    it, so until then each query fails on the old name. A worker that may not act as the
    owner role leaves it to the next build."""
    if visible_is_stale(conn, target.store.schema, target.name, target.source):
        run(conn, as_owner(visible_statements(target.store.schema, target.name, target.source)))


def load_target(conn: PgConnection, schema: str, name: str) -> Target | None:
    """The index ``name`` as a batch needs it: its catalog row share-locked and its source
    table locked and checked (:func:`~simindex.db.catalog.lock_source`) for this transaction;
    None while a build or drop holds it.

    Raises IndexNotFoundError if there is no such index, IndexNotReadyError when its source
    drifted (the index needs a rebuild, or its table is gone), SourceChangedError when the
    source changed a moment ago."""
    info = find_index(conn, schema, name, share_lock=True)
    if info is None:
        exists = conn.execute(
            statement("sync_catalog_exists", catalog=catalog(schema)), {"name": name}
        ).fetchone()
        if exists is None:
            raise IndexNotFoundError(f"no index named {name!r}")
        return None
    source = lock_source(conn, info)
    store = store_for(schema, name, source, info.spec)
    clusters = ClusterStore(schema, name) if info.clustering == "leader" else None
    triggers = Triggers(schema, name, source, store)
    return Target(name, source, info.spec, store, triggers, clusters, broken=info.broken)


def move(conn: PgConnection, schema: str, name: str, limit: int) -> int:
    """Move up to ``limit`` entries of index ``name``'s inbox into its queue, for a
    transaction of their own committed before a batch takes from the queue (see ``sync_move``
    in ``db/sql/sync.sql``); how many keys it queued that were not queued yet. By the index's
    name alone: no lock of its catalog row, which a build or drop may hold."""
    inbox, queue = inbox_and_queue(schema, name)
    moved = conn.execute(statement("sync_move", inbox=inbox, queue=queue), {"limit": limit})
    return max(moved.rowcount, 0)


def take(conn: PgConnection, target: Target, limit: int) -> list[Any]:
    """Remove up to ``limit`` entries no other transaction holds; their keys, in their text
    form (any key PostgreSQL can store, read back by the key type's input function)."""
    rows = conn.execute(
        statement("sync_take", queue=target.triggers.queue), {"limit": limit}
    ).fetchall()
    return [key for (key,) in rows]


def take_keys(conn: PgConnection, target: Target, keys: Sequence[Any]) -> list[Any]:
    """Remove the entries of ``keys`` (waiting for any other transaction holding one); their
    keys in their text form, as :func:`take`."""
    rows = conn.execute(
        statement("sync_take_keys", queue=target.triggers.queue, key_type=target.triggers.key_type),
        {"keys": key_array(conn, keys)},
    ).fetchall()
    return [key for (key,) in rows]


def requeue(conn: PgConnection, target: Target, keys: Sequence[Any]) -> None:
    """Queue ``keys`` (again); for repair and tests."""
    conn.execute(
        statement("sync_requeue", queue=target.triggers.queue, key_type=target.triggers.key_type),
        {"keys": key_array(conn, keys)},
    )


def deletes_due_in(conn: PgConnection, target: Target, delay: float) -> float | None:
    """Seconds until the oldest delete of source rows that no sweep has handled yet is
    ``delay`` seconds old (0 or less: a sweep is due); None when none is recorded."""
    row = conn.execute(
        statement("sync_deletes_due", deletes=target.triggers.deletes), {"delay": delay}
    ).fetchone()
    return None if row is None or row[0] is None else float(row[0])


def sweep(conn: PgConnection, target: Target) -> int | None:
    """Remove the index rows whose source row was deleted, in this (READ COMMITTED)
    transaction: the deletes recorded so far are consumed, then one anti-join per side table
    removes every row whose key the source no longer holds (and its leader cluster's row).
    How many index rows went; None while a build runs (the deletes stay recorded).

    The DELETE trigger records only that a delete happened; no answer names a deleted row
    meanwhile (answers are filtered through the source). The sweep first waits for the
    batches in flight (:func:`prepare`): one may have read a row before its delete and write
    its index rows back; its own statements come after, so they see those rows."""
    triggers = target.triggers
    # The anti-join reads the source as the worker, through no policy of the source's (its
    # side tables' policies show a worker every row).
    refuse_policies(conn, target.source)
    (free,) = conn.execute(
        statement("sync_sweep_begin"),
        {
            "build_class": BUILD_LOCK_CLASS,
            "class": BATCH_LOCK_CLASS,
            "key": triggers.build_lock_key,
        },
    ).fetchone() or (False,)
    if not free:
        return None
    conn.execute(statement("sync_take_deletes", deletes=triggers.deletes))
    source = target.source
    tables = list(target.store.side_tables())
    if target.leader_clusters is not None:
        tables.append(target.leader_clusters.table)
    removed = 0
    for position, table in enumerate(tables):
        done = conn.execute(
            statement(
                "sync_sweep_rows",
                table=table,
                source=source.identifier,
                key=sql.Identifier(source.key_column),
            )
        ).rowcount
        if position == 0:
            removed = max(done, 0)
    return removed


def fail(conn: PgConnection, target: Target, keys: Sequence[Any], error: str) -> None:
    """Record ``keys`` as failed items with ``error``."""
    for key in keys:
        conn.execute(
            statement("sync_fail", failed=target.triggers.failed), {"key": key, "error": error}
        )


def note(conn: PgConnection, target: Target, health: Health, error: str | None = None) -> None:
    """Update the index's health in the catalog (:func:`~simindex.db.catalog.record_health`),
    in a savepoint: a worker role without the right to do so still syncs."""
    try:
        with conn.transaction():
            record_health(
                conn,
                target.triggers.schema,
                target.name,
                health,
                error,
                failed=target.triggers.failed,
            )
    except psycopg.OperationalError:
        raise
    except psycopg.Error:
        pass


def queue_counts(bind: Bind, name: str, *, index_schema: str = DEFAULT_SCHEMA) -> tuple[int, int]:
    """(queued keys, failed items) of an index."""
    with transaction(bind) as conn:
        target = target_unlocked(conn, index_schema, name)
        row = conn.execute(
            statement(
                "sync_counts",
                inbox=target.triggers.inbox,
                queue=target.triggers.queue,
                failed=target.triggers.failed,
            )
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def failed_items(
    bind: Bind, name: str, *, index_schema: str = DEFAULT_SCHEMA
) -> list[tuple[Any, str, int, Any]]:
    """The failed items of an index: (key, error, attempts, failed_at), by key."""
    with transaction(bind) as conn:
        target = target_unlocked(conn, index_schema, name)
        cursor = conn.cursor()
        lenient_keys(cursor)  # a key Python cannot hold comes as its text
        rows = cursor.execute(
            statement("sync_failed_items", failed=target.triggers.failed)
        ).fetchall()
    return [(row[0], row[1], row[2], row[3]) for row in rows]


def target_unlocked(
    conn: PgConnection, schema: str, name: str, *, lock_table: bool = False
) -> Target:
    """The index ``name`` as a batch needs it, without locking its catalog row; with
    ``lock_table``, its source locked and checked, for reading
    (:func:`~simindex.db.catalog.lock_source`)."""
    info = read_index(conn, schema, name)
    source = lock_source(conn, info) if lock_table else info.source
    store = store_for(schema, name, source, info.spec)
    triggers = Triggers(schema, name, source, store)
    return Target(name, source, info.spec, store, triggers, broken=info.broken)
