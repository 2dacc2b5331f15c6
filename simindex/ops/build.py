"""Backfill: read the source with a server-side cursor, fingerprint on all cores, COPY.

The new side tables are built beside the live ones and swapped in at the end, in one
transaction: queries keep answering from the old index during a rebuild, and a failed build
leaves it as it was. A build first counts the source: a SimHash design sized to the table is
chosen again for that count (:func:`simindex.core.spec.refreshed`), and a method that ignores
common shingles or weighs by IDF learns their counts from a sample of the rows
(:func:`learn_counts`); the swap then replaces the query functions and the delete triggers
too, since the side tables' columns may have changed.

The worker processes make each batch's COPY text as well as its fingerprints
(:func:`copy_rows`), and batches go to them ahead of the COPYs, so a COPY leaves no core idle.
Memory stays bounded: at most ``(workers + 1) *`` :data:`BATCH_BYTES` of text is in flight
(:func:`~simindex.ops.workers.computed`). Queue entries the
build's read covered are removed with the swap (see :func:`_dequeue`), so a build after
loading a table leaves nothing for ``sync`` to do again.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from sqlalchemy.engine import Connection

from simindex.core import validators
from simindex.core.fingerprints import fingerprint_batch
from simindex.core.frequency import KEPT_SHINGLES, SAMPLE_ROWS, ShingleCounts, count_shingles
from simindex.core.spec import SPEC_VERSION, IndexSpec, refreshed
from simindex.db.answers import visible_statements
from simindex.db.catalog import (
    DEFAULT_SCHEMA,
    IndexInfo,
    Store,
    catalog,
    lock_source,
    read_index,
    record_health,
    side_statement,
    store_for,
    store_of,
)
from simindex.db.connection import Bind, PgConnection, connect, transaction
from simindex.db.objects import create_statements, drop_statements
from simindex.db.privileges import (
    OWNER,
    back_to_caller,
    become_owner,
    carry_grants,
    give_grants,
    grants_of,
    warn_if_superuser,
)
from simindex.db.source import Source, check_owner, describe, row_count, unfiltered
from simindex.db.statements import run, statement
from simindex.db.triggers import Triggers, event_triggers_on
from simindex.errors import IndexBusyError
from simindex.ops.batch import DEFAULT_MAX_TEXT_BYTES, over_limit
from simindex.ops.workers import computed

_log = logging.getLogger(__name__)
Progress = Callable[[int, int | None], None]
"""Called with (source rows read so far, the rows the source holds)."""

# Below this many rows, starting worker processes costs more than it saves.
_PARALLEL_FROM_ROWS = 50_000
# Rows a COPY into the staging tables takes at most (see _Pending).
_COPY_ROWS = 32_768


@dataclass(frozen=True, slots=True)
class BuildReport:
    """What a build did: rows indexed, rows skipped (NULL or empty text), seconds taken,
    queue entries it made unnecessary (keys queued before its read, which it indexed), and
    rows failed: texts over ``max_text_bytes``, not read but recorded as failed items, as
    sync records them."""

    rows: int
    skipped: int
    seconds: float
    dequeued: int = 0
    failed: int = 0


MAX_BATCH_SIZE = 1_000_000
"""Rows per batch at most (a batch's texts are in memory at once)."""
MAX_WORKERS = 256
BATCH_BYTES = 32 * 1024 * 1024
"""Bytes of text in a batch at most (a longer text is a batch of its own)."""
INLINE_BYTES = 16 * 1024
"""Texts up to this long come with the build's cursor; longer ones are read one at a time."""
SWAP_LOCK_TIMEOUT = "100ms"
"""How long a build's swap waits for its locks at a time (queries queue behind it no longer)."""
SWAP_WAIT_SECONDS = 600.0
"""How long a build tries to take the locks of its swap before it gives up."""
_SWAP_RETRY_DELAYS = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
DEQUEUE_KEYS = 1_000_000
"""Queued keys a build takes off the queue at most (it keeps them in memory while it reads);
entries past these stay queued, and sync processes them again."""


class _Read:
    """The build's read, batch by batch: keys in their text form (which COPY reads back), and
    the exact row versions read of the keys that were queued before it (see :func:`_dequeue`).

    A batch holds ``size`` rows or :data:`BATCH_BYTES` of text, whichever comes first: the
    cursor sends texts up to :data:`INLINE_BYTES` (and fetches few enough rows that a fetch
    stays within the bytes too); a longer text is read alone, by its row version's ctid, and
    fingerprinted as a batch of one. A text over ``max_text_bytes`` is not read: its key and
    size are kept in :attr:`too_long`."""

    def __init__(
        self, conn: PgConnection, triggers: Triggers, queued: frozenset[str], max_text_bytes: int
    ) -> None:
        self.conn = conn
        self.max_text_bytes = max_text_bytes
        self.too_long: list[tuple[str, int]] = []
        source = triggers.source
        self.one = statement(
            "build_read_one",
            text=sql.Identifier(source.text_column),
            key=sql.Identifier(source.key_column),
            key_type=triggers.key_type,
            table=source.identifier,
        )
        self.queued = queued
        self.versions: list[str] = []
        self.ctids: list[str] = []

    def batches(self, cursor: Any, size: int) -> Iterator[tuple[list[Any], list[str | None], int]]:
        keys: list[Any] = []
        texts: list[str | None] = []
        held = 0
        while rows := cursor.fetchmany(min(size, BATCH_BYTES // INLINE_BYTES)):
            for key, text, version, ctid, length in rows:
                if length is not None and length > self.max_text_bytes:
                    self._seen(key, version, ctid)  # a failed item now, as sync makes it
                    self.too_long.append((key, length))
                    continue
                if length is not None and text is None:  # a long text: alone
                    found = self.conn.execute(self.one, {"ctid": ctid, "key": key}).fetchone()
                    if found is None:
                        continue  # deleted since the read's snapshot: the delete queued it
                    self._seen(key, version, ctid)
                    yield [key], [found[0]], length
                    continue
                self._seen(key, version, ctid)
                keys.append(key)
                texts.append(text)
                held += length or 0
                if len(keys) >= size or held >= BATCH_BYTES:
                    yield keys, texts, held
                    keys, texts, held = [], [], 0
        if keys:
            yield keys, texts, held

    def _seen(self, key: str, version: str, ctid: str) -> None:
        if key in self.queued:
            self.versions.append(version)
            self.ctids.append(ctid)


def build(
    bind: Bind,
    name: str,
    *,
    index_schema: str = DEFAULT_SCHEMA,
    batch_size: int = 2000,
    workers: int | None = None,
    progress: Progress | None = None,
    max_text_bytes: int | None = DEFAULT_MAX_TEXT_BYTES,
) -> BuildReport:
    """See :meth:`simindex.index.Index.build`."""
    validators.integer("batch_size", batch_size, low=1, high=MAX_BATCH_SIZE)
    if workers is not None:
        validators.integer("workers", workers, low=1, high=MAX_WORKERS)
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be callable, got {type(progress).__name__}")
    limit = validators.text_bytes(max_text_bytes)
    started = time.perf_counter()
    indexed = skipped = 0
    with transaction(bind) as conn:
        info, source = _prepare(conn, index_schema, name)
        estimate = row_count(conn, source)
        if workers is None:
            parallel = estimate >= _PARALLEL_FROM_ROWS
            workers = (os.cpu_count() or 1) if parallel else 1
        counts = learn_counts(conn, source, info.spec, estimate) if info.spec.learns else None
        spec = refreshed(info.spec, estimate, counts)
        live = store_for(index_schema, name, source, info.spec)
        store = store_for(index_schema, name, source, spec)
        triggers = Triggers(index_schema, name, source, store)
        # Before the snapshot the read takes: deletes meanwhile queue their keys.
        triggers.build_lock(conn)
        (isolation,) = conn.execute(statement("build_isolation")).fetchone() or ("",)
        # Later statements see later commits only under READ COMMITTED: else nothing is
        # dequeued (sync does it again).
        dequeue = isolation == "read committed"
        queued = _queued_keys(conn, triggers) if dequeue else frozenset()
        run(conn, become_owner())
        live.drop_staging(conn)
        store.drop_staging(conn)
        store.create(conn, staging=True)
        run(conn, back_to_caller())
        spec_json = spec.to_json()
        row = conn.execute(statement("build_has_owner_rights"), {"owner": OWNER}).fetchone()
        pending = _Pending(store, switch=not (row and row[0]))
        read = _Read(conn, triggers, queued, 2**62 if limit is None else limit)
        # The source is read with the caller's rights (the cursor checks them when it opens)
        # and without row-level security (refused if the caller is subject to it), so no
        # policy of the table's owner runs; every fetch runs as the caller, and simindex's
        # tables are written as its owner role between fetches (_Pending.flush).
        with unfiltered(conn, source):
            reader = conn.cursor(name="simindex_build")
            reader.execute(
                statement(
                    "build_read",
                    key=sql.Identifier(source.key_column),
                    text=sql.Identifier(source.text_column),
                    table=source.identifier,
                    version=statement("build_row_version") if queued else sql.SQL("NULL"),
                ),
                {"inline": INLINE_BYTES},
            )
            task = functools.partial(copy_rows, store, spec_json)
            in_flight = (workers + 1) * BATCH_BYTES
            for lines, kept, read_rows in computed(
                task, read.batches(reader, batch_size), workers, in_flight
            ):
                pending.add(conn, lines, kept)
                indexed += kept
                skipped += read_rows - kept
                if progress is not None:
                    progress(indexed + skipped, estimate)
            reader.close()
        pending.flush(conn)
        run(conn, become_owner())
        for key, size in read.too_long:
            error = over_limit(size, read.max_text_bytes)
            conn.execute(
                statement("sync_fail", failed=triggers.failed), {"key": key, "error": error}
            )
        store.finish(conn, staging=True)
        _lock_for_swap(conn, live.side_tables())
        _swap(conn, live, store, triggers, trusted=event_triggers_on(conn, index_schema))
        conn.execute(
            statement("catalog_set_spec", catalog=catalog(index_schema)),
            {"name": name, "spec": spec_json, "spec_version": SPEC_VERSION},
        )
        run(conn, back_to_caller())
        dequeued = _dequeue(conn, triggers, read) if dequeue else 0
        conn.execute(
            statement("catalog_built", catalog=catalog(index_schema)),
            {"name": name, "row_count": indexed, "skipped_count": skipped},
        )
        if read.too_long:
            key, size = read.too_long[-1]
            error = f"key {key}: {over_limit(size, read.max_text_bytes)}"
            record_health(conn, index_schema, name, "row_error", error)
        else:
            record_health(conn, index_schema, name, "resolved", failed=triggers.failed)
        warn_if_superuser(conn, "build")
    if not isinstance(bind, Connection):
        _vacuum(bind, store)
    seconds = time.perf_counter() - started
    return BuildReport(indexed, skipped, seconds, dequeued, failed=len(read.too_long))


def learn_counts(conn: PgConnection, source: Source, spec: IndexSpec, rows: int) -> ShingleCounts:
    """Count the shingles of about :data:`~simindex.core.frequency.SAMPLE_ROWS` rows of the
    source (all of a table that small), read with the caller's rights."""
    percent = 100.0 if rows <= SAMPLE_ROWS else 100.0 * SAMPLE_ROWS / rows
    shingling = spec.method.shingling
    with unfiltered(conn, source), conn.cursor(name="simindex_sample") as cursor:
        cursor.itersize = 500
        cursor.execute(
            statement(
                "source_sample", text=sql.Identifier(source.text_column), table=source.identifier
            ),
            {"percent": percent},
        )
        # Bounded even when the row estimate is far too low (a table never analyzed).
        texts = itertools.islice(cursor, 2 * SAMPLE_ROWS)
        counts = count_shingles(shingling.hashes(text) for (text,) in texts)
    share = spec.method.ignore_common
    if share is not None and len(counts.common(share)) == KEPT_SHINGLES:
        _log.warning(
            "more than %s shingles are common in %s (held by over %s of the sampled rows): "
            "only the %s most common are ignored",
            f"{KEPT_SHINGLES:,}",
            source.identifier.as_string(None),
            f"{share:.2%}",
            f"{KEPT_SHINGLES:,}",
        )
    return counts


def _queued_keys(conn: PgConnection, triggers: Triggers) -> frozenset[str]:
    """The keys queued now (at most :data:`DEQUEUE_KEYS`), in their text form."""
    rows = conn.execute(
        statement("build_queued_keys", queue=triggers.queue, inbox=triggers.inbox),
        {"limit": DEQUEUE_KEYS},
    )
    return frozenset(key for (key,) in rows)


def _dequeue(conn: PgConnection, triggers: Triggers, read: _Read) -> int:
    """Remove the entries of the queue and the inbox whose rows the build read as they are
    now.

    An entry no writer holds is locked first; then a new statement (a snapshot taken after the
    locks, so every writer that committed before them is seen) deletes the entries whose
    source row's current version is one the build read (same table, ctid and xmin: a row
    version is never changed in place, and one written later has another ctid). A row
    changed since, written by a transaction the read could not see (in a subtransaction
    too), or deleted keeps its entry: sync processes it.
    """
    if not read.versions:
        return 0
    source = triggers.source
    dequeued = 0
    for table in (triggers.queue, triggers.inbox):
        locked = [
            ctid for (ctid,) in conn.execute(statement("build_lock_queue", queue=table)).fetchall()
        ]
        if not locked:
            continue
        deleted = conn.execute(
            statement(
                "build_dequeue",
                queue=table,
                source=source.identifier,
                key=sql.Identifier(source.key_column),
            ),
            {"locked": locked, "ctids": read.ctids, "versions": read.versions},
        )
        dequeued += max(deleted.rowcount, 0)
    return dequeued


def _prepare(conn: PgConnection, index_schema: str, name: str) -> tuple[IndexInfo, Source]:
    """The index, its catalog row locked (builds and drops of it wait), and its source locked
    and checked. An index that needs a rebuild is made again first, for its source as it is
    now (its objects dropped and created, as ``drop`` and ``create`` would)."""
    run(conn, become_owner())
    conn.execute(statement("catalog_lock", catalog=catalog(index_schema), name=sql.Literal(name)))
    # The VACUUM after the commit can only mark pages all-visible (for index-only scans) once
    # the commit is known durable.
    conn.execute(statement("synchronous_commit_local"))
    info = read_index(conn, index_schema, name)
    run(conn, back_to_caller())
    if info.state == "needs_rebuild":
        source = describe(
            conn,
            info.source.table,
            info.source.text_column,
            schema=info.source.schema,
            key=info.source.key_column,
        )
        check_owner(conn, source)
        queue = Triggers(index_schema, name, source, store_of(info)).queue
        given = grants_of(conn, queue)  # rights given per index, for the new tables
        run(conn, drop_statements(index_schema, name, info.source, info.spec))
        trusted = event_triggers_on(conn, index_schema)
        run(conn, create_statements(index_schema, name, source, info.spec, trusted=trusted))
        info = read_index(conn, index_schema, name)
        triggers = Triggers(index_schema, name, source, store_of(info))
        run(conn, become_owner())
        give_grants(conn, given, [*triggers.tables(), *triggers.store.side_tables()])
        run(conn, back_to_caller())
    source = lock_source(conn, info)
    # describe() again: the checks of create (a text column by built-in casts, a unique key)
    # and what the trigger function needs (positions, the key's =).
    return info, describe(
        conn, source.table, source.text_column, schema=source.schema, key=source.key_column
    )


def copy_rows(
    store: Store, spec_json: str, keys: list[Any], texts: list[str | None]
) -> tuple[str, int, int]:
    """A batch's side-table rows as COPY text, the rows in it and the texts read: the work of
    build's worker processes (fingerprints, and the text the build's COPY sends)."""
    values, present = fingerprint_batch(spec_json, texts)
    kept = np.flatnonzero(present)
    kept_keys = [keys[i] for i in kept.tolist()]
    return store.copy_lines(kept_keys, values[kept]), len(kept_keys), len(keys)


class _Pending:
    """Rows waiting for their COPY into the staging tables, as COPY text.

    Few large COPY statements, not one per batch: since PostgreSQL 16 each COPY extends the
    table by up to 64 pages ahead and leaves what it did not fill empty, which cost a
    2,000-row batch of MinHash rows a third of its pages.
    """

    def __init__(self, store: Store, *, switch: bool) -> None:
        self.store = store
        self.switch = switch
        self.rows = 0
        self.chunks: list[str] = []

    def add(self, conn: PgConnection, lines: str, rows: int) -> None:
        if rows:
            self.chunks.append(lines)
            self.rows += rows
        if self.rows >= _COPY_ROWS:
            self.flush(conn)

    def flush(self, conn: PgConnection) -> None:
        """COPY the rows waiting: as the caller, when it has the owner role's privileges (no
        role switch while the build's read cursor is open); else, with ``switch``, as the owner
        role, the caller's role back before the next fetch."""
        if not self.rows:
            return
        if self.switch:
            run(conn, become_owner())
        self.store.copy_text(conn, self.chunks, staging=True)
        if self.switch:
            run(conn, back_to_caller())
        self.rows, self.chunks = 0, []


def _lock_for_swap(conn: PgConnection, tables: list[sql.Identifier]) -> None:
    """Lock the live tables the swap drops, waiting :data:`SWAP_LOCK_TIMEOUT` at a time and
    trying again after a pause (growing to 2 s): a query never waits behind the build for
    longer than that, even while another transaction (a reader's, idle in it) holds the tables
    for long. Raises :class:`~simindex.errors.IndexBusyError` after :data:`SWAP_WAIT_SECONDS`.
    """
    deadline = time.monotonic() + SWAP_WAIT_SECONDS
    lock = statement("build_swap_lock", tables=sql.SQL(", ").join(tables))
    for attempt in itertools.count():
        try:
            with conn.transaction():  # a savepoint: a lock timeout leaves the build usable
                row = conn.execute(
                    statement("build_lock_timeout"), {"timeout": SWAP_LOCK_TIMEOUT}
                ).fetchone()
                conn.execute(lock)
                conn.execute(
                    statement("build_lock_timeout_restore"), {"previous": row[0] if row else "0"}
                )
            return
        except psycopg.errors.LockNotAvailable as exc:
            if time.monotonic() >= deadline:
                raise IndexBusyError(
                    f"build waited {SWAP_WAIT_SECONDS:.0f} s for its index's tables, which "
                    "another transaction holds (a reader's, left open?); the index is "
                    "unchanged. Set idle_in_transaction_session_timeout for reader roles"
                ) from exc
            delay = _SWAP_RETRY_DELAYS[min(attempt, len(_SWAP_RETRY_DELAYS) - 1)]
            _log.info("build: its index's tables are in use; trying again in %.2f s", delay)
            time.sleep(delay)


def _swap(
    conn: PgConnection, live: Store, store: Store, triggers: Triggers, *, trusted: bool
) -> None:
    """Put the staging tables in place of the live ones (whose shape may differ) with new query
    functions, and write the trigger function again, for the new tables and the source as it
    is now (``trusted``: see :meth:`~simindex.db.triggers.Triggers.function_statements`)."""
    run(conn, live.function_drop_statements())
    run(conn, live.table_statements(staging=False))
    store.swap_in_staging(conn)
    conn.execute(side_statement(store.schema, store.name, store))
    carry_grants(conn, triggers.queue, store.side_tables())  # rights given per index
    run(conn, visible_statements(store.schema, store.name, triggers.source))
    run(conn, store.function_statements())
    run(conn, triggers.function_statements(trusted=trusted))


def _vacuum(bind: Bind, store: Store) -> None:
    """Set the visibility map, so prefix scans are index-only (VACUUM needs autocommit)."""
    tables = store.side_tables()
    with connect(bind) as connection:
        raw = connection.connection.driver_connection
        autocommit = connection.execution_options(isolation_level="AUTOCOMMIT")
        for table in tables:
            autocommit.exec_driver_sql(statement("vacuum", table=table).as_string(raw))
