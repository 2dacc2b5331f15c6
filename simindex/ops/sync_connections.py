"""A sync worker's connections and transactions.

A worker holds one connection at once and more while a backlog needs them
(:class:`Connections`), and runs each batch in a unit of its own (:meth:`WorkerBind.unit`): a
READ COMMITTED transaction on an Engine or DSN, a savepoint in the caller's READ COMMITTED
transaction on a caller's Connection. Waiting for work or a retry checks the stop flag every
quarter second.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, Protocol

import psycopg
from psycopg import sql
from sqlalchemy.engine import Connection

from simindex.db.connection import Bind, PgConnection, connect, raw_connection
from simindex.db.statements import statement

# How long a --follow worker waits between checks of its stop flag.
_STOP_POLL_SECONDS = 0.25


class StopFlag(Protocol):
    """What ``stop`` must offer: ``threading.Event`` and ``multiprocessing.Event`` both do."""

    def is_set(self) -> bool: ...


class Connections:
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
            self.opened.append(raw_connection(self.stack.enter_context(connect(self.bind))))
        return self.opened


class WorkerBind:
    """Where a worker's batches run: an Engine, a DSN or a caller's Connection."""

    def __init__(self, bind: Bind) -> None:
        self.bind = bind
        self.on_callers_connection = isinstance(bind, Connection)
        self._isolation_checked = False

    @contextmanager
    def session(self) -> Iterator[Connections]:
        """The worker's connections."""
        with ExitStack() as stack:
            connection = stack.enter_context(connect(self.bind))
            if self.on_callers_connection and not connection.in_transaction():
                connection.begin()  # so that the caller's commit() commits our work
            yield Connections(self.bind, stack, raw_connection(connection))

    def look(self, conn: PgConnection, query: sql.Composed) -> tuple[Any, ...] | None:
        """The first row of one read-only statement: in autocommit, one round trip, on a
        connection of the worker's own between batches; in a unit otherwise."""
        if self.on_callers_connection or (
            conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
        ):
            with self.unit(conn):
                return conn.execute(query).fetchone()
        conn.autocommit = True
        try:
            return conn.execute(query).fetchone()
        finally:
            if not conn.closed:
                conn.autocommit = False

    @contextmanager
    def unit(self, conn: PgConnection) -> Iterator[None]:
        """A READ COMMITTED transaction of our own; on a caller's Connection, a savepoint in
        its transaction (so that a broken index leaves the caller's transaction usable), which
        must be READ COMMITTED."""
        idle = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        if self.on_callers_connection:
            if idle:  # in the caller's transaction, or transaction() would commit
                conn.execute("SELECT")
            if not self._isolation_checked:
                (isolation,) = conn.execute(statement("sync_isolation")).fetchone() or ("",)
                if isolation != "read committed":
                    raise ValueError(
                        f"sync runs in a READ COMMITTED transaction, and this Connection's is "
                        f"{isolation.upper()}: a batch must see the rows as they are when it "
                        "takes their entries"
                    )
                self._isolation_checked = True
            with conn.transaction():
                yield
            return
        with conn.transaction():
            if idle:
                conn.execute(statement("sync_read_committed"))
            yield


class Looks:
    """How long a following worker waits before its next look for work: from ``first`` after
    a pass that did work, twice as long after each look or pass that found none, up to
    ``longest``. A steady stream of writes is seen within ``first``; an idle worker looks every
    ``longest``; a look that finds entries another worker holds does not make it spin."""

    def __init__(self, first: float, longest: float) -> None:
        self.first = min(first, longest)
        self.longest = longest
        self.interval = self.first

    def worked(self) -> None:
        self.interval = self.first

    def idle(self) -> None:
        self.interval = min(self.interval * 2, self.longest)


def wait_for_work(
    stop: StopFlag, seconds: float, looks: Looks, pending: Callable[[], bool]
) -> None:
    """Until ``pending()`` says there is work (asked after each of ``looks``' intervals),
    ``seconds`` or ``stop``."""
    deadline = time.monotonic() + seconds
    while not stop.is_set():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        sleep(stop, min(looks.interval, remaining))
        if stop.is_set() or time.monotonic() >= deadline:
            return
        if pending():
            return
        looks.idle()


def sleep(stop: StopFlag, seconds: float) -> None:
    """``seconds``, or until ``stop``."""
    deadline = time.monotonic() + seconds
    while not stop.is_set() and time.monotonic() < deadline:
        time.sleep(min(_STOP_POLL_SECONDS, max(deadline - time.monotonic(), 0)))
