"""What a sync reports: totals per index, broken indexes, and its structured log records.

Log records (logger ``simindex.ops.sync``) carry their fields as ``record.simindex``, a dict
with an ``event``: ``batch`` at INFO, one per batch (index, taken, indexed, removed, failed,
seconds); ``row_failed`` at WARNING, one per row that failed (index, key, error);
``index_broken`` at ERROR (index, error, attempts, retry_in); ``index_busy`` at ERROR (index,
seconds: held by a build, a drop or an open transaction longer than ``busy_limit``);
``index_recovered`` (index,
attempts) and ``reconnect`` (error, retry_in) at WARNING. The CLI prints them as text or JSON
lines (``--log-format``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from simindex.ops.batch import BatchResult

_log = logging.getLogger("simindex.ops.sync")

BUSY_LIMIT = 3600.0
"""Seconds an index may stay held (by a build, a drop, or a transaction left open on its
catalog row) before sync reports it as a problem."""


@dataclass(slots=True)
class Totals:
    """Queue entries taken, rows written, keys removed from the index, keys recorded as
    failed, and batches committed."""

    taken: int = 0
    indexed: int = 0
    removed: int = 0
    failed: int = 0
    batches: int = 0

    def add(self, other: BatchResult) -> None:
        self.taken += other.taken
        self.indexed += other.indexed
        self.removed += other.removed
        self.failed += other.failed
        self.batches += 1


@dataclass(slots=True)
class SyncReport(Totals):
    """What a sync did: the :class:`Totals` of all indexes and of each (``by_index``), indexes
    skipped because a build or drop held them, those held longer than ``busy_limit`` seconds
    (``stuck``, name: seconds held so far), indexes broken when it ended (name: error),
    reconnections after the server went away, and seconds taken."""

    busy: set[str] = field(default_factory=set)
    stuck: dict[str, float] = field(default_factory=dict)
    busy_limit: float = BUSY_LIMIT
    busy_since: dict[str, float] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)
    by_index: dict[str, Totals] = field(default_factory=dict)
    reconnects: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Whether every row taken was processed, no index is broken and none was held past
        ``busy_limit``."""
        return self.failed == 0 and not self.broken and not self.stuck

    def held(self, name: str) -> None:
        """Index ``name`` was skipped: something holds it. Held past ``busy_limit`` since it
        was first found held, it is a problem: in ``stuck``, logged once."""
        self.busy.add(name)
        now = time.monotonic()
        seconds = now - self.busy_since.setdefault(name, now)
        if seconds < self.busy_limit:
            return
        if name not in self.stuck:
            _log.error(
                "%s: held for %.0f s by a build, a drop or a transaction left open on its "
                "catalog row; its queue is not drained",
                name,
                seconds,
                extra=fields("index_busy", index=name, seconds=round(seconds, 1)),
            )
        self.stuck[name] = seconds

    def released(self, name: str) -> None:
        """Index ``name`` was taken by a batch: no longer held."""
        self.busy_since.pop(name, None)
        self.stuck.pop(name, None)

    def add_batch(self, name: str, result: BatchResult) -> None:
        self.add(result)
        self.by_index.setdefault(name, Totals()).add(result)


def fields(event: str, **fields: object) -> dict[str, object]:
    """``extra`` of a log record: its structured fields, for the CLI's log formats."""
    return {"simindex": {"event": event, **fields}}


def describe(exc: BaseException) -> str:
    state = getattr(exc, "sqlstate", None)
    code = f" [{state}]" if state else ""
    return " ".join(f"{type(exc).__name__}{code}: {exc}".split())


def log_batch(name: str, result: BatchResult, seconds: float) -> None:
    _log.info(
        "%s: batch of %d: %d indexed, %d removed, %d failed in %.3f s",
        name,
        result.taken,
        result.indexed,
        result.removed,
        result.failed,
        seconds,
        extra=fields(
            "batch",
            index=name,
            taken=result.taken,
            indexed=result.indexed,
            removed=result.removed,
            failed=result.failed,
            seconds=round(seconds, 4),
        ),
    )
    for key, error in result.failures:
        _log.warning(
            "%s: key %s failed: %s",
            name,
            key,
            error,
            extra=fields("row_failed", index=name, key=key, error=error),
        )
