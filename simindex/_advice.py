"""What the facade tells a user beyond the answer: a warning where recall is poor, and why a
key is not in the index."""

from __future__ import annotations

import warnings
from typing import Any

from simindex.core.spec import SimHash
from simindex.db.catalog import IndexInfo, store_of
from simindex.db.connection import PgConnection
from simindex.db.statements import statement
from simindex.db.triggers import Triggers
from simindex.errors import KeyNotIndexedError, LowRecallWarning


def warn_below_threshold(info: IndexInfo, threshold: float | None) -> None:
    """A LowRecallWarning for a MinHash threshold below the one the index's bands are tuned
    for (the caller's caller is the line warned about)."""
    method = info.spec.method
    valid = isinstance(threshold, int | float) and not isinstance(threshold, bool)
    if not valid or isinstance(method, SimHash) or not 0 <= threshold < method.threshold:  # type: ignore[operator]
        return  # nothing to warn of, or a wrong threshold that its check refuses
    warnings.warn(
        f"threshold {threshold} is below the {method.threshold} index {info.name!r} was tuned "
        "for: its LSH bands find pairs that are similar only by chance (recall falls fast below "
        "the tuned threshold); create an index with a lower threshold instead",
        LowRecallWarning,
        stacklevel=3,
    )


_INTEGER_TYPES = ("smallint", "integer", "bigint")


def not_indexed(conn: PgConnection, info: IndexInfo, key: Any) -> KeyNotIndexedError | TypeError:
    """Why ``key`` is not in the index, as far as its queue and failed items tell; a float
    for an integer key is a TypeError (PostgreSQL compares it as numeric and finds no row)."""
    if isinstance(key, float) and info.source.key_type in _INTEGER_TYPES:
        return TypeError(
            f"key {key!r} is a float, which does not fit the index's key type "
            f"{info.source.key_type}: give an int"
        )
    triggers = Triggers(info.index_schema, info.name, info.source, store_of(info))
    queued, error = conn.execute(
        statement("key_state", queue=triggers.queue, failed=triggers.failed), {"key": key}
    ).fetchone() or (False, None)
    if error is not None:
        why = f"sync failed on its row: {error}; see `simindex sync --retry-failed`"
    elif queued:
        why = "its row is queued and not synced yet: run `simindex sync` or sync(engine)"
    else:
        why = "no such row, or its text is NULL, empty or punctuation only"
    return KeyNotIndexedError.of(info.name, key, why=why)
