"""Backfill: read the source with a server-side cursor, fingerprint on all cores, COPY.

The new side tables are built beside the live ones and swapped in at the end, in one
transaction: queries keep answering from the old index during a rebuild, and a failed build
leaves it as it was. Memory stays bounded: at most ``workers + 1`` batches are in flight.
Queue entries the build's read covered are removed with the swap (see :func:`_dequeue`), so a
build after loading a table leaves nothing for ``sync`` to do again.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from psycopg import sql
from sqlalchemy.engine import Connection

from simindex.db.catalog import Store, catalog, read_index, store_for
from simindex.db.connection import Bind, PgConnection, connect, transaction
from simindex.db.simhash_store import SimHashStore
from simindex.db.source import Source, describe, row_estimate
from simindex.db.statements import statement
from simindex.db.triggers import Triggers
from simindex.ops.workers import computed

Progress = Callable[[int, int | None], None]
"""Called with (source rows read so far, the planner's estimate of all rows or None)."""

# Below this many rows, starting worker processes costs more than it saves.
_PARALLEL_FROM_ROWS = 50_000


@dataclass(frozen=True, slots=True)
class BuildReport:
    """What a build did: rows indexed, rows skipped (NULL or empty text), seconds taken, and
    queue entries it made unnecessary (keys queued before its read, which it indexed)."""

    rows: int
    skipped: int
    seconds: float
    dequeued: int = 0


MAX_BATCH_SIZE = 1_000_000
"""Rows per batch at most (a batch's texts are in memory at once)."""
MAX_WORKERS = 256


def _batches(cursor: Any, size: int) -> Iterator[tuple[list[Any], list[str | None]]]:
    while rows := cursor.fetchmany(size):
        yield [row[0] for row in rows], [row[1] for row in rows]


def build(
    bind: Bind,
    index_schema: str,
    name: str,
    *,
    batch_size: int = 2000,
    workers: int | None = None,
    progress: Progress | None = None,
) -> BuildReport:
    """See :meth:`simindex.index.Index.build`."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int):
        raise TypeError(f"batch_size must be an int, got {type(batch_size).__name__}")
    if not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise ValueError(f"batch_size must be from 1 to {MAX_BATCH_SIZE:,}, got {batch_size}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)):
        raise TypeError(f"workers must be an int or None, got {type(workers).__name__}")
    if workers is not None and not 1 <= workers <= MAX_WORKERS:
        raise ValueError(f"workers must be from 1 to {MAX_WORKERS}, got {workers}")
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be callable, got {type(progress).__name__}")
    started = time.perf_counter()
    indexed = skipped = 0
    with transaction(bind) as conn:
        conn.execute(
            statement("catalog_lock", catalog=catalog(index_schema), name=sql.Literal(name))
        )
        # The VACUUM after the commit can only mark pages all-visible (for index-only scans)
        # once the commit is known durable.
        conn.execute(statement("synchronous_commit_local"))
        info = read_index(conn, index_schema, name)
        source = describe(
            conn,
            info.source.table,
            info.source.text_column,
            schema=info.source.schema,
            key=info.source.key_column,
        )
        estimate = row_estimate(conn, source) or _planner_estimate(conn, source)
        if workers is None:
            parallel = estimate is not None and estimate >= _PARALLEL_FROM_ROWS
            workers = (os.cpu_count() or 1) if parallel else 1
        store = store_for(index_schema, name, source, info.spec)
        store.drop_staging(conn)
        store.create(conn, staging=True)
        # Taken before the read's own snapshot, so whatever it sees, the read sees too.
        snapshot, isolation = conn.execute(statement("build_snapshot")).fetchone() or ("", "")
        reader = conn.cursor(name="simindex_build")
        reader.execute(
            statement(
                "source_read",
                key=sql.Identifier(source.key_column),
                text=sql.Identifier(source.text_column),
                table=source.identifier,
            )
        )
        spec_json = info.spec.to_json()
        for keys, (values, present) in computed(spec_json, _batches(reader, batch_size), workers):
            kept = np.flatnonzero(present)
            kept_keys = [keys[i] for i in kept.tolist()]
            if isinstance(store, SimHashStore):
                store.copy(conn, store.rows(kept_keys, values[kept]), staging=True)
            elif kept_keys:
                store.copy(conn, kept_keys, values[kept], staging=True)
            indexed += len(kept_keys)
            skipped += len(keys) - len(kept_keys)
            if progress is not None:
                progress(indexed + skipped, estimate)
        reader.close()
        store.finish(conn, staging=True)
        store.swap_in_staging(conn)
        dequeued = 0
        if isolation == "read committed":  # later statements see later commits
            dequeued = _dequeue(conn, Triggers(index_schema, name, source, store), snapshot)
        conn.execute(
            statement("catalog_built", catalog=catalog(index_schema)),
            {"name": name, "row_count": indexed, "skipped_count": skipped},
        )
    if not isinstance(bind, Connection):
        _vacuum(bind, store)
    return BuildReport(indexed, skipped, time.perf_counter() - started, dequeued)


def _planner_estimate(conn: PgConnection, source: Source) -> int | None:
    """The planner's guess for a table never analyzed (from its size on disk)."""
    row = conn.execute(statement("build_row_estimate", table=source.identifier)).fetchone()
    try:
        plan = json.loads(row[0]) if row and isinstance(row[0], str) else row[0] if row else []
        rows = int(plan[0]["Plan"]["Plan Rows"]) if plan else 0
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    return rows or None


def _dequeue(conn: PgConnection, triggers: Triggers, snapshot: str) -> int:
    """Remove the queue entries whose rows the build read as they are now.

    An entry no writer holds is locked first; then a new statement (a snapshot taken after the
    locks, so every writer that committed before them is seen) deletes the entries whose
    source row's current version was visible to ``snapshot``, the one taken before the read.
    A row changed since, a writer still in its transaction, or a deleted row keeps its entry.
    """
    ctids = [
        ctid
        for (ctid,) in conn.execute(statement("build_lock_queue", queue=triggers.queue)).fetchall()
    ]
    if not ctids:
        return 0
    source = triggers.source
    deleted = conn.execute(
        statement(
            "build_dequeue",
            queue=triggers.queue,
            source=source.identifier,
            key=sql.Identifier(source.key_column),
        ),
        {"ctids": ctids, "snapshot": snapshot},
    )
    return deleted.rowcount


def _vacuum(bind: Bind, store: Store) -> None:
    """Set the visibility map, so prefix scans are index-only (VACUUM needs autocommit)."""
    tables = (
        [store.table()] if isinstance(store, SimHashStore) else [store.signatures(), store.bands()]
    )
    with connect(bind) as connection:
        raw = connection.connection.driver_connection
        autocommit = connection.execution_options(isolation_level="AUTOCOMMIT")
        for table in tables:
            autocommit.exec_driver_sql(statement("vacuum_analyze", table=table).as_string(raw))
