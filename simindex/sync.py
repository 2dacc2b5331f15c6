"""The sync worker, at its documented import path (the code: :mod:`simindex.ops.sync` and
:mod:`simindex.ops.batch`)."""

from __future__ import annotations

from simindex.ops.batch import DEFAULT_MAX_TEXT_BYTES, failed_items, queue_counts
from simindex.ops.sync import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_CONNECTIONS,
    StopFlag,
    stop_on_signals,
    sync,
)
from simindex.ops.sync_report import SyncReport, Totals

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_CONNECTIONS",
    "DEFAULT_MAX_TEXT_BYTES",
    "StopFlag",
    "SyncReport",
    "Totals",
    "failed_items",
    "queue_counts",
    "stop_on_signals",
    "sync",
]
