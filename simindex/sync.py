"""The sync worker: drain each index's queue into its side tables (layer 7).

A batch is one transaction: it takes up to ``batch_size`` queue entries (``FOR UPDATE SKIP
LOCKED``, so any number of workers share the work and never take the same key), re-reads those
rows of the source *as they are now*, recomputes their fingerprints, writes them (or deletes
the index rows of keys whose row is gone or has no features) and removes the entries. A worker
that dies mid-batch loses nothing: its transaction rolls back and the entries are queued again.
While a backlog lasts, a worker runs a batch on each of its ``connections`` at once, in threads:
psycopg lets go of the GIL while it waits, so the server writes one batch while Python
fingerprints the next.

What happens to each kind of row:

* row gone, text NULL, empty or without features (whitespace, punctuation only): its index rows
  are deleted (a build counts such rows as skipped);
* ``varchar``, ``char``, ``citext`` and other string types: indexed by their text (compared as
  ``text`` by the update trigger, so a case-only change of a ``citext`` is seen);
* a text over ``max_text_bytes`` (UTF-8 bytes, default 16 MiB): not read; recorded as a failed
  item saying so. ``sync(retry_failed=True, max_text_bytes=...)`` with a larger limit indexes
  it (a 50 MB text takes about 7 s and 0.7 GB to fingerprint);
* anything else that fails (an error computing or writing one row): recorded as a failed item
  with its error, and the batch goes on without it.

Failed items stay in ``<name>_failed`` until the key is processed successfully: after the row
changes again, or when ``retry_failed=True`` queues them all again.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Protocol

import numpy as np
import psycopg
import sqlalchemy.exc
from psycopg import sql
from sqlalchemy.engine import Connection

from simindex.build import fingerprint_batch
from simindex.catalog import DEFAULT_SCHEMA, check_schema
from simindex.cluster_store import ClusterStore
from simindex.connection import connect
from simindex.errors import IndexNotFoundError
from simindex.index import Bind, catalog, check_name, store_for
from simindex.minhash_store import MinHashStore
from simindex.pg_array import key_array
from simindex.simhash_store import SimHashStore
from simindex.source import Source
from simindex.spec import IndexSpec
from simindex.sql import PgConnection, statement
from simindex.triggers import Triggers, channel

DEFAULT_MAX_TEXT_BYTES = 16 * 1024 * 1024
# Large enough that a worker's two connections overlap well (each batch costs a few round
# trips, and after each the thread waits for the GIL); benchmarks/sync.py measured the choice.
DEFAULT_BATCH_SIZE = 2000
DEFAULT_CONNECTIONS = 2
# How long a --follow worker waits between checks of its stop flag.
_STOP_POLL_SECONDS = 0.25
_RECONNECT_DELAYS = (0.1, 0.5, 1.0, 2.0, 5.0)
_log = logging.getLogger(__name__)


class StopFlag(Protocol):
    """What ``stop`` must offer: ``threading.Event`` and ``multiprocessing.Event`` both do."""

    def is_set(self) -> bool: ...


@dataclass(slots=True)
class SyncReport:
    """What a sync did: queue entries taken, rows written, keys removed from the index, keys
    recorded as failed, batches committed, indexes skipped because a build or drop held them,
    reconnections after the server went away, and seconds taken."""

    taken: int = 0
    indexed: int = 0
    removed: int = 0
    failed: int = 0
    batches: int = 0
    busy: set[str] = field(default_factory=set)
    reconnects: int = 0
    seconds: float = 0.0

    def add(self, other: BatchResult) -> None:
        self.taken += other.taken
        self.indexed += other.indexed
        self.removed += other.removed
        self.failed += other.failed
        self.batches += 1


@dataclass(frozen=True, slots=True)
class BatchResult:
    taken: int
    indexed: int
    removed: int
    failed: int


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


def load_target(conn: PgConnection, schema: str, name: str) -> Target | None:
    """The index ``name``, its catalog row share-locked for this transaction; None while a build
    or drop holds it. Raises IndexNotFoundError if there is no such index."""
    row = conn.execute(
        statement("sync_catalog_share", catalog=catalog(schema)), {"name": name}
    ).fetchone()
    if row is None:
        exists = conn.execute(
            statement("sync_catalog_exists", catalog=catalog(schema)), {"name": name}
        ).fetchone()
        if exists is None:
            raise IndexNotFoundError(f"no index named {name!r}")
        return None
    source = Source(0, *row[:5])
    spec = IndexSpec.from_json(row[5])
    store = store_for(schema, name, source, spec)
    clusters = ClusterStore(schema, name) if row[6] == "leader" else None
    return Target(name, source, spec, store, Triggers(schema, name, source, store), clusters)


def take(conn: PgConnection, target: Target, limit: int) -> list[Any]:
    """Remove up to ``limit`` entries no other transaction holds; their keys."""
    rows = conn.execute(
        statement("sync_take", queue=target.triggers.queue), {"limit": limit}
    ).fetchall()
    return [key for (key,) in rows]


def take_keys(conn: PgConnection, target: Target, keys: Sequence[Any]) -> list[Any]:
    """Remove the entries of ``keys`` (waiting for any other transaction holding one)."""
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


def process(
    conn: PgConnection,
    target: Target,
    keys: Sequence[Any],
    *,
    max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES,
) -> BatchResult:
    """Bring the index rows of ``keys`` up to date with the source rows as this transaction sees
    them. Rows that fail are recorded in the failed items; everything else is written."""
    if not keys:
        return BatchResult(0, 0, 0, 0)
    source = target.source
    rows = conn.execute(
        statement(
            "sync_read",
            key=sql.Identifier(source.key_column),
            text=sql.Identifier(source.text_column),
            source=source.identifier,
            key_type=target.triggers.key_type,
        ),
        {"keys": key_array(conn, keys), "max_bytes": max_text_bytes},
    ).fetchall()
    found = {row[0] for row in rows}
    remove = [key for key in keys if key not in found]
    failures: list[tuple[Any, str]] = []
    candidates: list[tuple[Any, str]] = []
    too_long: list[Any] = []
    for key, text, size in rows:
        if text is not None:
            candidates.append((key, text))
        elif size is None:
            remove.append(key)
        else:
            too_long.append(key)  # its old fingerprint is wrong now: out of the index
            failures.append(
                (
                    key,
                    f"text is {size} bytes, over max_text_bytes={max_text_bytes}; "
                    "retry with a larger limit: sync(..., retry_failed=True, max_text_bytes=...)",
                )
            )
    upsert_keys, values, no_features, compute_failures = _fingerprints(target.spec, candidates)
    remove += no_features
    failures += compute_failures
    written = _write(conn, target, remove + too_long, upsert_keys, values, set(too_long))
    failures += written.failures
    for key, error in failures:
        conn.execute(
            statement("sync_fail", failed=target.triggers.failed), {"key": key, "error": error}
        )
    return BatchResult(len(keys), written.indexed, written.removed, len(failures))


def _fingerprints(
    spec: IndexSpec, candidates: list[tuple[Any, str]]
) -> tuple[list[Any], Any, list[Any], list[tuple[Any, str]]]:
    """(keys with features, their values, keys without, failures) of (key, text) pairs."""
    spec_json = spec.to_json()
    keys = [key for key, _ in candidates]
    texts: list[str | None] = [text for _, text in candidates]
    failures: list[tuple[Any, str]] = []
    try:
        values, present = fingerprint_batch(spec_json, texts)
    except Exception:  # find the row that failed: one at a time
        kept_keys, parts, flags = [], [], []
        for key, text in candidates:
            try:
                one_value, one_present = fingerprint_batch(spec_json, [text])
            except Exception as exc:
                failures.append((key, f"fingerprint: {type(exc).__name__}: {exc}"))
                continue
            kept_keys.append(key)
            parts.append(one_value)
            flags.append(one_present)
        keys = kept_keys
        values = np.concatenate(parts) if parts else np.zeros((0,), dtype=np.uint64)
        present = np.concatenate(flags) if flags else np.zeros(0, dtype=bool)
    kept = np.flatnonzero(present)
    with_features = [keys[i] for i in kept.tolist()]
    without = [keys[i] for i in np.flatnonzero(~present).tolist()]
    return with_features, values[kept], without, failures


@dataclass(frozen=True, slots=True)
class _Written:
    indexed: int
    removed: int
    failures: list[tuple[Any, str]]


def _write(
    conn: PgConnection,
    target: Target,
    remove: list[Any],
    keys: list[Any],
    values: Any,
    still_failed: set[Any],
) -> _Written:
    """Deletes first, then upserts (so two spellings of one citext key end as the new one);
    keys written clear their failed items, except ``still_failed``.

    No pipeline mode here, though it would save round trips: with a batch's megabytes of
    signatures, psycopg's pipeline can stall with both ends waiting for each other."""
    try:
        with conn.transaction():
            _write_rows(conn, target, remove, keys, values, still_failed)
        return _Written(len(keys), len(set(remove) - still_failed), [])
    except psycopg.OperationalError:
        raise
    except psycopg.Error:
        pass  # isolate the failing rows below, each in its own savepoint
    failures: list[tuple[Any, str]] = []
    indexed = removed = 0
    for key in remove:
        try:
            with conn.transaction():
                _write_rows(conn, target, [key], [], values[:0], still_failed)
            removed += key not in still_failed
        except psycopg.OperationalError:
            raise
        except psycopg.Error as exc:
            failures.append((key, _describe(exc)))
    for position, key in enumerate(keys):
        try:
            with conn.transaction():
                _write_rows(conn, target, [], [key], values[position : position + 1], set())
            indexed += 1
        except psycopg.OperationalError:
            raise
        except psycopg.Error as exc:
            failures.append((key, _describe(exc)))
    return _Written(indexed, removed, failures)


def _write_rows(
    conn: PgConnection,
    target: Target,
    remove: list[Any],
    keys: list[Any],
    values: Any,
    still_failed: set[Any],
) -> None:
    target.store.delete(conn, remove)
    target.store.upsert(conn, keys, values)
    if target.leader_clusters is not None:
        target.leader_clusters.forget(conn, target.source.key_type, remove)
        target.leader_clusters.assign(conn, target.source.key_type, keys)
    done = [key for key in remove if key not in still_failed] + keys
    if done:
        conn.execute(
            statement(
                "sync_forget_failed",
                failed=target.triggers.failed,
                key_type=target.triggers.key_type,
            ),
            {"keys": key_array(conn, done)},
        )


def _describe(exc: psycopg.Error) -> str:
    state = f" [{exc.sqlstate}]" if exc.sqlstate else ""
    return f"{type(exc).__name__}{state}: {exc}".strip()


def queue_counts(bind: Bind, name: str, *, index_schema: str = DEFAULT_SCHEMA) -> tuple[int, int]:
    """(queued keys, failed items) of an index."""
    from simindex.index import transaction

    with transaction(bind) as conn:
        target = _target_unlocked(conn, index_schema, name)
        row = conn.execute(
            statement("sync_counts", queue=target.triggers.queue, failed=target.triggers.failed)
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def failed_items(
    bind: Bind, name: str, *, index_schema: str = DEFAULT_SCHEMA
) -> list[tuple[Any, str, int, Any]]:
    """The failed items of an index: (key, error, attempts, failed_at), by key."""
    from simindex.index import transaction

    with transaction(bind) as conn:
        target = _target_unlocked(conn, index_schema, name)
        rows = conn.execute(
            statement("sync_failed_items", failed=target.triggers.failed)
        ).fetchall()
    return [(row[0], row[1], row[2], row[3]) for row in rows]


def _target_unlocked(conn: PgConnection, schema: str, name: str) -> Target:
    from simindex.index import _get_row

    info = _get_row(conn, schema, name)
    if info is None:
        raise IndexNotFoundError(f"no index named {name!r}")
    store = store_for(schema, name, info.source, info.spec)
    return Target(name, info.source, info.spec, store, Triggers(schema, name, info.source, store))


# -- the worker loop


def sync(
    bind: Bind,
    names: Sequence[str] | None = None,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    follow: bool = False,
    stop: StopFlag | None = None,
    retry_failed: bool = False,
    max_text_bytes: int | None = DEFAULT_MAX_TEXT_BYTES,
    heartbeat: float = 30.0,
    connections: int = DEFAULT_CONNECTIONS,
    index_schema: str = DEFAULT_SCHEMA,
) -> SyncReport:
    """Drain the queues of ``names`` (default: every index), one transaction per batch.

    Parameters:
        bind: an Engine or a DSN (batches commit here); or a Connection, in whose transaction
            everything runs (each batch in a savepoint; not with ``follow``).
        batch_size: queue entries per batch and transaction; their texts are in memory at
            once, so lower it for very large texts.
        follow: keep running: LISTEN on the indexes' channels and drain whenever notified, or
            after ``heartbeat`` seconds at the latest; reconnect when the server goes away.
        stop: when set, finish the current batch and return (check it from a signal handler,
            see :func:`stop_on_signals`). Without ``follow``, sync returns when the queues are
            empty anyway.
        retry_failed: queue every failed item again first.
        max_text_bytes: texts longer than this become failed items instead of being read
            (None: no limit).
        heartbeat: the longest wait, in seconds, for a notification before looking anyway.
        connections: batches in flight at once while a backlog lasts, each on its own
            connection (and thread): with two, the server writes one batch while this process
            fingerprints the next. A trickle of changes uses one. Always one on a Connection.
        index_schema: the schema simindex was migrated into.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    limit = max_text_bytes
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"max_text_bytes must be a non-negative int or None, got {limit!r}")
    if not heartbeat > 0:
        raise ValueError(f"heartbeat must be a positive number of seconds, got {heartbeat!r}")
    if isinstance(connections, bool) or not isinstance(connections, int) or connections < 1:
        raise ValueError(f"connections must be a positive int, got {connections!r}")
    if follow and isinstance(bind, Connection):
        raise ValueError(
            "follow=True commits batch by batch: give an Engine or a DSN, not a Connection"
        )
    check_schema(index_schema)
    chosen = None if names is None else [check_name(name) for name in names]
    worker = _Worker(
        bind,
        chosen,
        batch_size=batch_size,
        stop=stop if stop is not None else threading.Event(),
        max_text_bytes=max_text_bytes if max_text_bytes is not None else 2**62,
        heartbeat=heartbeat,
        connections=1 if isinstance(bind, Connection) else connections,
        schema=index_schema,
    )
    started = time.perf_counter()
    worker.run(follow=follow, retry_failed=retry_failed)
    worker.report.seconds = time.perf_counter() - started
    return worker.report


class _Worker:
    def __init__(
        self,
        bind: Bind,
        names: list[str] | None,
        *,
        batch_size: int,
        stop: StopFlag,
        max_text_bytes: int,
        heartbeat: float,
        connections: int,
        schema: str,
    ) -> None:
        self.bind = bind
        self.names = names
        self.batch_size = batch_size
        self.stop = stop
        self.max_text_bytes = max_text_bytes
        self.heartbeat = heartbeat
        self.connections = connections
        self.schema = schema
        self.report = SyncReport()
        self.listening: set[str] = set()
        self._report_lock = threading.Lock()

    def run(self, *, follow: bool, retry_failed: bool) -> None:
        if not follow:
            with self._session() as (conns, _):
                if retry_failed:
                    self._requeue_failed(conns.first)
                self._drain(conns)
            return
        failures = 0
        while not self.stop.is_set():
            try:
                with self._session(listen=True) as (conns, listener):
                    assert listener is not None
                    self.listening.clear()
                    if retry_failed:
                        self._requeue_failed(conns.first)
                        retry_failed = False
                    while not self.stop.is_set():
                        self._listen(conns.first, listener)
                        self._drain(conns)
                        failures = 0
                        self._wait(listener)
            except (psycopg.OperationalError, sqlalchemy.exc.OperationalError) as exc:
                delay = _RECONNECT_DELAYS[min(failures, len(_RECONNECT_DELAYS) - 1)]
                failures += 1
                self.report.reconnects += 1
                _log.warning("sync interrupted (%s); reconnecting in %.1f s", exc, delay)
                self._sleep(delay)

    @contextmanager
    def _session(
        self, *, listen: bool = False
    ) -> Iterator[tuple[_Connections, PgConnection | None]]:
        with ExitStack() as stack:
            connection = stack.enter_context(connect(self.bind))
            if isinstance(self.bind, Connection) and not connection.in_transaction():
                connection.begin()  # so that the caller's commit() commits our work
            conns = _Connections(self.bind, stack, _raw(connection))
            listener = None
            if listen:
                second = stack.enter_context(connect(self.bind))
                # Reset when the connection goes back to an Engine's pool.
                listener = _raw(second.execution_options(isolation_level="AUTOCOMMIT"))
            yield conns, listener

    @contextmanager
    def _unit(self, conn: PgConnection) -> Iterator[None]:
        """A transaction of our own; on a caller's Connection, just the caller's transaction."""
        if isinstance(self.bind, Connection):
            yield
        else:
            with conn.transaction():
                yield

    def _indexes(self, conn: PgConnection) -> list[str]:
        if self.names is not None:
            return self.names
        with self._unit(conn):
            rows = conn.execute(statement("catalog_list", catalog=catalog(self.schema)))
            return [str(name) for (name,) in rows.fetchall()]

    def _listen(self, conn: PgConnection, listener: PgConnection) -> None:
        for name in self._indexes(conn):
            if name not in self.listening:
                listener.execute(statement("sync_listen", channel=sql.Identifier(channel(name))))
                self.listening.add(name)

    def _requeue_failed(self, conn: PgConnection) -> None:
        for name in self._indexes(conn):
            with self._unit(conn):
                target = load_target(conn, self.schema, name)
                if target is None:
                    self.report.busy.add(name)
                    continue
                conn.execute(
                    statement(
                        "sync_requeue_failed",
                        queue=target.triggers.queue,
                        failed=target.triggers.failed,
                    )
                )

    def _drain(self, conns: _Connections) -> None:
        """Batches until every queue is empty (or stop): on the first connection alone while
        batches come back part-full, on all of them at once from the first full one."""
        names = self._indexes(conns.first)
        with self._report_lock:
            for name in names:
                self.report.busy.discard(name)
        backlog = self._round_robin(conns.first, names, until_full=self.connections > 1)
        if backlog:
            self._drain_together(conns.up_to(self.connections), backlog)

    def _round_robin(
        self,
        conn: PgConnection,
        names: list[str],
        *,
        until_full: bool = False,
        halted: threading.Event | None = None,
    ) -> list[str]:
        """Batches over ``names`` in turn until each queue is empty, or stop (or ``halted``);
        with ``until_full``, the names still active when a batch first comes back full."""
        active = list(names)
        while active:
            for name in list(active):
                if self.stop.is_set() or (halted is not None and halted.is_set()):
                    return []
                taken = self._batch(conn, name)
                if not taken:
                    active.remove(name)
                elif until_full and taken == self.batch_size:
                    return active
        return []

    def _drain_together(self, conns: list[PgConnection], names: list[str]) -> None:
        """Each connection drains ``names`` in its own thread. psycopg lets go of the GIL
        while it waits for the server, so one thread's batch is written while another's
        texts are fingerprinted."""
        errors: list[BaseException] = []
        failed = threading.Event()  # the others finish their batch and stop

        def drain(conn: PgConnection) -> None:
            try:
                self._round_robin(conn, names, halted=failed)
            except BaseException as exc:  # re-raised in the calling thread
                errors.append(exc)
                failed.set()

        helpers = [threading.Thread(target=drain, args=(conn,)) for conn in conns[1:]]
        for helper in helpers:
            helper.start()
        drain(conns[0])
        for helper in helpers:
            helper.join()
        if errors:
            raise errors[0]

    def _batch(self, conn: PgConnection, name: str) -> int:
        """One batch of one index, in one transaction; how many entries it took."""
        with self._unit(conn):
            try:
                target = load_target(conn, self.schema, name)
            except IndexNotFoundError:
                if self.names is not None:
                    raise
                return 0  # dropped since the list was read
            if target is None:
                with self._report_lock:
                    self.report.busy.add(name)
                return 0
            keys = take(conn, target, self.batch_size)
            if not keys:
                return 0
            result = process(conn, target, keys, max_text_bytes=self.max_text_bytes)
        with self._report_lock:
            self.report.add(result)
        return len(keys)

    def _wait(self, listener: PgConnection) -> None:
        """Until a notification, the heartbeat or stop."""
        deadline = time.monotonic() + self.heartbeat
        while not self.stop.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            # stop_after=1 still takes every notification that arrived together: one drain
            # answers them all.
            if list(listener.notifies(timeout=min(remaining, _STOP_POLL_SECONDS), stop_after=1)):
                return

    def _sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self.stop.is_set() and time.monotonic() < deadline:
            time.sleep(min(_STOP_POLL_SECONDS, max(deadline - time.monotonic(), 0)))


class _Connections:
    """A worker's connections: the first at once, the others when a backlog first needs them
    (a worker that only ever sees a trickle of changes holds one)."""

    def __init__(self, bind: Bind, stack: ExitStack, first: PgConnection) -> None:
        self.bind = bind
        self.stack = stack
        self.opened = [first]

    @property
    def first(self) -> PgConnection:
        return self.opened[0]

    def up_to(self, count: int) -> list[PgConnection]:
        while len(self.opened) < count:
            self.opened.append(_raw(self.stack.enter_context(connect(self.bind))))
        return self.opened


def _raw(connection: Connection) -> PgConnection:
    raw = connection.connection.driver_connection
    if not isinstance(raw, psycopg.Connection):
        raise TypeError("simindex needs the psycopg (version 3) driver")
    return raw


@contextmanager
def stop_on_signals(
    signals: Sequence[signal.Signals] = (signal.SIGTERM, signal.SIGINT),
) -> Iterator[threading.Event]:
    """An event set by SIGTERM or SIGINT while the block runs (main thread only): hand it to
    ``sync(..., stop=...)`` so a signal finishes the current batch and returns cleanly. The
    previous handlers come back on exit."""
    event = threading.Event()

    def handle(number: int, frame: FrameType | None) -> None:
        event.set()

    previous = {number: signal.signal(number, handle) for number in signals}
    try:
        yield event
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
