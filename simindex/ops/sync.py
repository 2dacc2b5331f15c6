"""The sync worker: drain each index's queue into its side tables, batch after batch.

Each batch is one transaction (:mod:`simindex.ops.batch`); a worker that dies mid-batch loses
nothing: its transaction rolls back and the entries are queued again. While a backlog lasts, a
worker runs a batch on each of its ``connections`` at once, in threads: psycopg lets go of the
GIL while it waits, so the server writes one batch while Python fingerprints the next. With
``follow``, it keeps going: between passes it asks whether an index has entries waiting (one
statement, ``sync_pending``), 10 ms after a pass that did work, then twice as long after each
look that finds none, up to every ``poll_interval`` seconds, and drains when one has. The
triggers send no NOTIFY (see :mod:`simindex.db.triggers`): a notifying transaction holds a
lock of the whole cluster while its commit is flushed.

One index never stalls the others: an error no row escapes (its table or a column gone, a right
revoked; see :mod:`simindex.ops.batch`) rolls that batch back, is recorded on the index in the
catalog (``broken``, ``last_error``) and logged, and the worker goes on with the other indexes.
A sync without ``follow`` tries a broken index once; with ``follow`` it is tried again after
1 s, 2 s, 5 s, ... up to every 5 minutes, and the first batch that succeeds clears the mark.
Each batch, failed row, broken index and reconnection is logged as a structured record
(:mod:`simindex.ops.sync_report`).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

import psycopg
import sqlalchemy.exc
from psycopg import sql
from sqlalchemy.engine import Connection

from simindex.core import validators
from simindex.db.catalog import (
    DEFAULT_SCHEMA,
    check_name,
    check_schema,
    index_names,
    record_health,
)
from simindex.db.connection import Bind, PgConnection
from simindex.db.privileges import check_worker, warn_if_superuser
from simindex.db.statements import statement
from simindex.db.triggers import deletes_table, inbox_and_queue
from simindex.errors import IndexNotFoundError
from simindex.ops.batch import DEFAULT_MAX_TEXT_BYTES, BatchResult, probe, process
from simindex.ops.build import MAX_BATCH_SIZE
from simindex.ops.queue import (
    Target,
    deletes_due_in,
    fail,
    follow_renames,
    load_target,
    move,
    note,
    sweep,
    take,
    take_keys,
)
from simindex.ops.sync_connections import (
    Connections,
    Looks,
    StopFlag,
    WorkerBind,
    sleep,
    wait_for_work,
)
from simindex.ops.sync_report import SyncReport, describe, fields, log_batch

# Large enough that a worker's two connections overlap well (each batch costs a few round
# trips, and after each the thread waits for the GIL); benchmarks/sync.py measured the choice.
DEFAULT_BATCH_SIZE = 2000
DEFAULT_CONNECTIONS = 2
_RECONNECT_DELAYS = (0.1, 0.5, 1.0, 2.0, 5.0)
# Seconds before a --follow worker tries a broken index again, after each failure in a row.
# Single-entry batches cancelled in a row (each made a failed item) before the index is
# marked broken: the cause is then the index's (a statement_timeout too short for any row).
CANCELLED_SINGLES = 3
BROKEN_RETRY_DELAYS = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
# Seconds a following worker lets recorded deletes wait before it sweeps them: each sweep is a
# full anti-join (about 1 s at 1M rows), so an app that deletes all the time costs one sweep per
# index this often at most, whatever the number of workers.
DEFAULT_SWEEP_DELAY = 30.0
# Seconds a following worker waits at most between two looks for work: the longest a change
# waits before an idle worker sees it (a look is one statement of a few EXISTS, one round trip).
DEFAULT_POLL_INTERVAL = 0.1
# ... and at least: its first look after a pass that did work, so a steady stream of writes
# is seen within this (the wait doubles after each look that finds none).
FIRST_LOOK_SECONDS = 0.01
_log = logging.getLogger(__name__)
_ROLLBACKS_IN_ROW = 3  # batches of one index the server rolled back in a row before giving up


class BatchCancelledError(RuntimeError):
    """A batch of a single entry was cancelled by the server (a statement_timeout)."""


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
    report: SyncReport | None = None,
    sweep_delay: float = DEFAULT_SWEEP_DELAY,
    poll_interval: float = DEFAULT_POLL_INTERVAL,
) -> SyncReport:
    """Drain the queues of ``names`` (default: every index), one transaction per batch.

    Parameters:
        bind: an Engine or a DSN (batches commit here); or a Connection, in whose transaction
            everything runs (each batch in a savepoint; not with ``follow``).
        batch_size: queue entries per batch and transaction; their texts are in memory at
            once, so lower it for very large texts.
        follow: keep running: look for entries waiting every ``poll_interval`` seconds and
            drain when there are, and go over every index after ``heartbeat`` seconds at the
            latest; reconnect when the server goes away.
        stop: when set, finish the current batch and return (check it from a signal handler,
            see :func:`stop_on_signals`). Without ``follow``, sync returns when the queues are
            empty anyway.
        retry_failed: queue every failed item again first.
        max_text_bytes: texts longer than this become failed items instead of being read
            (None: no limit).
        heartbeat: with ``follow``, the longest time, in seconds, between two passes over
            every index (one finds indexes created since, and broken ones due again).
        connections: batches in flight at once while a backlog lasts, each on its own
            connection (and thread): with two, the server writes one batch while this process
            fingerprints the next. A trickle of changes uses one. Always one on a Connection.
        index_schema: the schema simindex was migrated into.
        report: the report to fill and return; another thread may read it while sync runs
            (to serve metrics).
        sweep_delay: with ``follow``, the index rows of deleted source rows are swept once
            the oldest delete not swept yet is this many seconds old (at most one sweep per
            index this often, however many workers); answers never name those rows
            meanwhile. Without ``follow``, sync sweeps before it returns, whatever their age.
        poll_interval: with ``follow``, the most seconds between two looks for entries
            waiting (the first look after a pass that did work comes after 10 ms, each next
            one twice as late): how long a change may wait before an idle worker sees it.

    Returns what was done; ``report.ok`` is false when rows failed or an index is broken.
    """
    validators.integer("batch_size", batch_size, low=1, high=MAX_BATCH_SIZE)
    validators.text_bytes(max_text_bytes)
    if not heartbeat > 0:
        raise ValueError(f"heartbeat must be a positive number of seconds, got {heartbeat!r}")
    validators.positive("connections", connections)
    if not sweep_delay >= 0:
        raise ValueError(f"sweep_delay must be 0 or more seconds, got {sweep_delay!r}")
    if not poll_interval > 0:
        raise ValueError(
            f"poll_interval must be a positive number of seconds, got {poll_interval!r}"
        )
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
        report=report if report is not None else SyncReport(),
        sweep_delay=sweep_delay,
        poll_interval=poll_interval,
    )
    started = time.perf_counter()
    worker.run(follow=follow, retry_failed=retry_failed)
    worker.report.seconds = time.perf_counter() - started
    return worker.report


@dataclass(slots=True)
class _Broken:
    attempts: int
    retry_at: float
    error: str


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
        report: SyncReport,
        sweep_delay: float,
        poll_interval: float,
    ) -> None:
        self.where = WorkerBind(bind)
        self.poll_interval = poll_interval
        # The indexes the last pass went over.
        self.followed: list[str] = []
        self.sweep_delay = sweep_delay
        # When (time.monotonic()) each index's recorded deletes are due for a sweep.
        self.sweep_at: dict[str, float] = {}
        self.names = names
        self.batch_size = batch_size
        self.stop = stop
        self.max_text_bytes = max_text_bytes
        self.heartbeat = heartbeat
        self.connections = connections
        self.schema = schema
        self.report = report
        self.follow = False
        self.broken: dict[str, _Broken] = {}
        self._role_checked = False
        self._rights_checked = False
        # Batch sizes of indexes whose batches were cancelled (see _batch).
        self.sizes: dict[str, int] = {}
        self.cancelled_in_row: dict[str, int] = {}
        self.rolled_back_in_row: dict[str, int] = {}
        self._report_lock = threading.Lock()

    def run(self, *, follow: bool, retry_failed: bool) -> None:
        self.follow = follow
        if not follow:
            with self.where.session() as conns:
                if retry_failed:
                    self._requeue_failed(conns.first)
                self._drain(conns)
            return
        failures = 0
        looks = Looks(FIRST_LOOK_SECONDS, self.poll_interval)
        while not self.stop.is_set():
            try:
                with self.where.session() as conns:
                    if retry_failed:
                        self._requeue_failed(conns.first)
                        retry_failed = False
                    while not self.stop.is_set():
                        batches = self.report.batches
                        self._drain(conns)
                        failures = 0
                        if self.report.batches != batches:
                            looks.worked()
                        else:  # entries another worker holds, or a heartbeat's pass
                            looks.idle()
                        wait_for_work(
                            self.stop,
                            min(self.heartbeat, self._next_retry(), self._next_sweep()),
                            looks,
                            lambda: self._pending(conns.first),
                        )
            except (psycopg.OperationalError, sqlalchemy.exc.OperationalError) as exc:
                delay = _RECONNECT_DELAYS[min(failures, len(_RECONNECT_DELAYS) - 1)]
                failures += 1
                self.report.reconnects += 1
                _log.warning(
                    "sync interrupted (%s); reconnecting in %.1f s",
                    exc,
                    delay,
                    extra=fields("reconnect", error=" ".join(str(exc).split()), retry_in=delay),
                )
                sleep(self.stop, delay)

    def _pending(self, conn: PgConnection) -> bool:
        """Whether an index the last pass went over has entries waiting in its inbox or
        queue, or deletes recorded that no sweep is planned for yet (a broken index waiting
        for its retry is not asked): one statement. An error (an index dropped, a right
        revoked) says yes, and the pass that follows finds out why; a lost connection raises."""
        with self._report_lock:
            asked = [name for name in self.followed if name not in self.broken]
            swept_later = set(self.sweep_at)
        if not asked:
            return False
        tests: list[sql.Composable] = []
        for name in asked:
            inbox, queue = inbox_and_queue(self.schema, name)
            tables = [inbox, queue]
            if name not in swept_later:
                tables.append(deletes_table(self.schema, name))
            tests.extend(sql.SQL("EXISTS (SELECT FROM {})").format(table) for table in tables)
        try:
            row = self.where.look(
                conn, statement("sync_pending", tests=sql.SQL(" OR ").join(tests))
            )
        except (psycopg.OperationalError, sqlalchemy.exc.OperationalError):
            raise
        except psycopg.Error:
            return True
        return bool(row and row[0])

    def _indexes(self, conn: PgConnection) -> list[str]:
        with self.where.unit(conn):
            if not self._rights_checked:
                check_worker(conn, self.schema)
                self._rights_checked = True
            if self.names is not None:
                return self.names
            return index_names(conn, self.schema)

    def _requeue_failed(self, conn: PgConnection) -> None:
        for name in self._indexes(conn):
            try:
                with self.where.unit(conn):
                    target = load_target(conn, self.schema, name)
                    if target is None:
                        self.report.held(name)
                        continue
                    conn.execute(
                        statement(
                            "sync_requeue_failed",
                            queue=target.triggers.queue,
                            failed=target.triggers.failed,
                        )
                    )
            except (psycopg.OperationalError, IndexNotFoundError):
                raise
            except Exception as exc:
                self._broke(conn, name, exc)

    def _drain(self, conns: Connections) -> None:
        """Batches until every queue is empty (or stop): on the first connection alone while
        batches come back part-full, on all of them at once from the first full one."""
        names = self._indexes(conns.first)
        self.followed = names
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
                if self._waiting(name):
                    active.remove(name)
                    continue
                taken = self._batch(conn, name)
                if not taken:  # (a cancelled batch, to try again smaller, counts -1)
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
        """One batch of one index, in one transaction; how many entries it took. An error that
        is not the connection's marks the index broken and takes nothing. A batch the server
        cancelled (a statement_timeout, a cancel request) is tried again half as large (-1);
        a batch of one cancelled marks the index broken, naming the cause."""
        started = time.perf_counter()
        size = self.sizes.get(name, self.batch_size)
        keys: list[object] = []
        try:
            try:
                with self.where.unit(conn):  # committed before the batch (see sync_move)
                    move(conn, self.schema, name, size)
            except psycopg.errors.UndefinedTable:
                pass  # dropped meanwhile: load_target says so
            with self.where.unit(conn):
                try:
                    target = load_target(conn, self.schema, name)
                except IndexNotFoundError:
                    if self.names is not None:
                        raise
                    return 0  # dropped since the list was read
                if target is None:
                    with self._report_lock:
                        self.report.held(name)
                    return 0
                with self._report_lock:
                    self.report.released(name)
                follow_renames(conn, target)
                keys = take(conn, target, size)
                if keys:
                    result = process(conn, target, keys, max_text_bytes=self.max_text_bytes)
                    if not self._role_checked:  # once a batch went well, not before an error
                        warn_if_superuser(conn, "sync")
                        self._role_checked = True
                elif target.broken:
                    probe(conn, target)  # raises while the source is still unreadable
                    result = BatchResult(0, 0, 0, 0)
                elif (swept := self._sweep(conn, target)) is not None:
                    result = BatchResult(0, 0, swept, 0)
                elif name not in self.broken:
                    return 0
                else:  # made again meanwhile (a rebuild): nothing queued, nothing broken
                    result = BatchResult(0, 0, 0, 0)
                if target.broken:
                    note(conn, target, "recovered")
                    note(conn, target, "resolved")
        except psycopg.errors.QueryCanceled as exc:
            return self._cancelled(conn, name, size, keys, exc)
        except psycopg.errors.TransactionRollback as exc:
            return self._rolled_back(name, exc)
        except (psycopg.OperationalError, sqlalchemy.exc.OperationalError, IndexNotFoundError):
            raise
        except Exception as exc:  # the index's own: recorded, and the others go on
            self._broke(conn, name, exc)
            return 0
        self.cancelled_in_row.pop(name, None)
        self.rolled_back_in_row.pop(name, None)
        if size < self.batch_size and len(keys) == size:
            self.sizes[name] = min(size * 2, self.batch_size)  # grow back while it succeeds
        with self._report_lock:
            if keys or result.removed:
                self.report.add_batch(name, result)
            known = self.broken.pop(name, None)
            self.report.broken.pop(name, None)
        if known is not None or target.broken:
            attempts = known.attempts if known is not None else 0
            _log.warning(
                "%s: recovered (%d failed attempts by this worker)",
                name,
                attempts,
                extra=fields("index_recovered", index=name, attempts=attempts),
            )
        if keys or result.removed:
            log_batch(name, result, time.perf_counter() - started)
        return len(keys)

    def _rolled_back(self, name: str, exc: psycopg.errors.TransactionRollback) -> int:
        """A batch the server rolled back to resolve a deadlock (or a serialization failure) is
        taken again, as PostgreSQL asks of any transaction it rolls back so: its entries went
        back to the queue whole. A deadlock with an app's transaction can happen: a writer that
        changes several keys in one transaction, one of them used again after a delete,
        removes that key's index rows and then waits for the batch holding another of its
        keys, which may want those rows. Three in a row: the connection's error, as before."""
        in_row = self.rolled_back_in_row.get(name, 0) + 1
        self.rolled_back_in_row[name] = in_row
        if in_row > _ROLLBACKS_IN_ROW:
            self.rolled_back_in_row.pop(name, None)
            raise exc
        _log.warning(
            "%s: batch rolled back by the server (%s); taking it again",
            name,
            describe(exc),
            extra=fields("batch_rolled_back", index=name, error=describe(exc)),
        )
        return -1

    def _sweep(self, conn: PgConnection, target: Target) -> int | None:
        """Once the queue is empty: the index rows of deleted source rows removed (see
        :func:`~simindex.ops.queue.sweep`); how many, or None when no delete was recorded, or
        none is ``sweep_delay`` old yet (following; the wait then ends when one is), or a
        build runs."""
        due_in = deletes_due_in(conn, target, self.sweep_delay if self.follow else 0.0)
        with self._report_lock:
            if due_in is not None and due_in > 0:
                self.sweep_at[target.name] = time.monotonic() + due_in
                return None
            self.sweep_at.pop(target.name, None)
        return None if due_in is None else sweep(conn, target)

    def _cancelled(
        self,
        conn: PgConnection,
        name: str,
        size: int,
        keys: list[object],
        exc: psycopg.errors.QueryCanceled,
    ) -> int:
        """A batch the server cancelled: try again half as large; a single entry cancelled
        becomes a failed item (it no longer holds up the queue), and after
        :data:`CANCELLED_SINGLES` of those in a row the index is marked broken."""
        cause = " ".join(str(exc).split())
        if size > 1:
            self.sizes[name] = size // 2
            _log.warning(
                "%s: a batch of %d entries was cancelled (%s); trying %d",
                name,
                size,
                cause,
                size // 2,
                extra=fields("batch_cancelled", index=name, size=size, error=cause),
            )
            return -1
        error = (
            f"cancelled ({cause}): the worker role's statement_timeout is shorter than one row "
            "takes, or a lock it waits for is held that long"
        )
        in_row = self.cancelled_in_row.get(name, 0) + 1
        self.cancelled_in_row[name] = in_row
        if in_row >= CANCELLED_SINGLES or not keys:
            self.cancelled_in_row.pop(name, None)
            self._broke(conn, name, BatchCancelledError(f"a batch of one entry was {error}"))
            return 0
        try:
            with self.where.unit(conn):
                target = load_target(conn, self.schema, name)
                if target is not None:
                    fail(conn, target, take_keys(conn, target, keys), error)
        except (psycopg.OperationalError, sqlalchemy.exc.OperationalError, IndexNotFoundError):
            raise
        except Exception as record_error:
            self._broke(conn, name, record_error)
            return 0
        with self._report_lock:
            self.report.add_batch(name, BatchResult(len(keys), 0, 0, len(keys)))
        return -1

    def _broke(self, conn: PgConnection, name: str, exc: Exception) -> None:
        """Record on index ``name`` the error that broke its batch; when to try it again."""
        error = describe(exc)
        with self._report_lock:
            before = self.broken.get(name)
            attempts = before.attempts + 1 if before is not None else 1
            delay = BROKEN_RETRY_DELAYS[min(attempts, len(BROKEN_RETRY_DELAYS)) - 1]
            retry_at = time.monotonic() + delay if self.follow else float("inf")
            self.broken[name] = _Broken(attempts, retry_at, error)
            self.report.broken[name] = error
        try:
            with self.where.unit(conn):
                record_health(conn, self.schema, name, "broken", error)
        except psycopg.OperationalError:
            raise
        except psycopg.Error as record_error:  # the worker's own rights, say: still logged
            error += f" (not recorded in the catalog: {describe(record_error)})"
        found: dict[str, object] = {"index": name, "error": error, "attempts": attempts}
        if self.follow:
            found["retry_in"] = delay
        _log.error(
            "%s: broken, its batch failed: %s", name, error, extra=fields("index_broken", **found)
        )

    def _waiting(self, name: str) -> bool:
        """Whether ``name`` is broken and not due for another try."""
        with self._report_lock:
            entry = self.broken.get(name)
        return entry is not None and time.monotonic() < entry.retry_at

    def _next_sweep(self) -> float:
        """Seconds until the next index's recorded deletes are due for a sweep (infinity if
        none)."""
        with self._report_lock:
            due = min(self.sweep_at.values(), default=float("inf"))
        return max(due - time.monotonic(), 0.0)

    def _next_retry(self) -> float:
        """Seconds until the next broken index is due (infinity if none)."""
        with self._report_lock:
            due = min((entry.retry_at for entry in self.broken.values()), default=float("inf"))
        return max(due - time.monotonic(), 0.0)


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
