"""One sync batch: take queued keys, re-read their rows, fingerprint, write, record failures.

A batch runs in the caller's transaction. Given the keys it took off the queue
(:mod:`simindex.ops.queue`), it re-reads those rows of the source *as they are now*,
recomputes their fingerprints, writes them (or deletes the index rows of keys whose row is gone
or has no features) and removes the entries.
What happens to each kind of row:

* row gone, text NULL, empty or without features (whitespace, punctuation only): its index rows
  are deleted (a build counts such rows as skipped);
* ``varchar``, ``char``, ``citext`` and other string types: indexed by their text (compared as
  ``text`` by the update trigger, so a case-only change of a ``citext`` is seen);
* a text over ``max_text_bytes`` (UTF-8 bytes, default 16 MiB): not read; recorded as a failed
  item saying so. ``sync(retry_failed=True, max_text_bytes=...)`` with a larger limit indexes
  it (a 50 MB text takes about 7 s and 0.7 GB to fingerprint);
* a row that cannot be read (invalid UTF-8 in a ``SQL_ASCII`` database, a cast that fails): the
  batch's read fails, so its rows are read again one by one; the bad row becomes a failed item
  and its neighbours are indexed;
* anything else that fails (an error computing or writing one row): recorded as a failed item
  with its error, and the batch goes on without it.

An error that no row can escape (the table, a column or a right gone: SQLSTATE classes 42 and
3F) is not a row's: it is raised, the batch rolls back with its entries still queued, and the
worker records it on the index (:mod:`simindex.ops.sync`).

Failed items stay in ``<name>_failed`` until the key is processed successfully: after the row
changes again, or when ``retry_failed=True`` queues them all again.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from simindex.core.fingerprints import fingerprint_batch
from simindex.core.spec import IndexSpec
from simindex.db.connection import PgConnection
from simindex.db.pg_array import key_array
from simindex.db.source import unfiltered
from simindex.db.statements import statement
from simindex.db.triggers import BATCH_LOCK_CLASS
from simindex.ops.queue import Target, fail, note

DEFAULT_MAX_TEXT_BYTES = 16 * 1024 * 1024
BATCH_BYTES = 32 * 1024 * 1024
"""Bytes of text a batch reads and fingerprints at once, whatever its rows; a longer text is
read alone (see ``sync_read``)."""


# SQLSTATE classes of errors about the table rather than a row: syntax error or access rule
# violation (undefined table or column, insufficient privilege), invalid schema name.
_INDEX_ERROR_CLASSES = ("42", "3F")


@dataclass(frozen=True, slots=True)
class BatchResult:
    taken: int
    indexed: int
    removed: int
    failed: int
    # (key, error) of each row that failed, for the worker's log.
    failures: tuple[tuple[Any, str], ...] = ()


def process(
    conn: PgConnection,
    target: Target,
    keys: Sequence[Any],
    *,
    max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES,
) -> BatchResult:
    """Bring the index rows of ``keys`` up to date with the source rows as this transaction sees
    them. Rows that fail are recorded in the failed items; everything else is written.

    Texts are read and fingerprinted :data:`BATCH_BYTES` at a time (a longer one alone)."""
    if not keys:
        return BatchResult(0, 0, 0, 0)
    return write(
        conn, target, prepare(conn, target, keys, max_text_bytes=max_text_bytes), len(keys)
    )


def write(conn: PgConnection, target: Target, ready: Prepared, taken: int) -> BatchResult:
    """Write what :func:`prepare` read and computed of ``taken`` keys, and record the rows
    that failed (see :func:`process`)."""
    failures = list(ready.failures)
    unread = ready.unread
    written = _write(conn, target, ready.remove + unread, ready.keys, ready.values, set(unread))
    failures += written.failures
    for key, error in failures:
        fail(conn, target, [key], error)
    if failures:
        key, error = failures[-1]
        note(conn, target, "row_error", f"key {key}: {error}")
    else:
        note(conn, target, "resolved")
    return BatchResult(taken, written.indexed, written.removed, len(failures), tuple(failures))


@dataclass(frozen=True, slots=True)
class Prepared:
    """What a batch writes: the keys whose index rows go (``remove``), those whose rows go
    because they could not be read (``unread``, also among ``failures``), the keys written
    with their fingerprints (``keys``, ``values``), and (key, error) of the rows that failed."""

    remove: list[Any]
    unread: list[Any]
    keys: list[Any]
    values: Any
    failures: list[tuple[Any, str]]


def prepare(
    conn: PgConnection,
    target: Target,
    keys: Sequence[Any],
    *,
    max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES,
) -> Prepared:
    """Read the rows of ``keys`` as this transaction sees them and fingerprint them (see
    :func:`process`), writing nothing yet; a sweep (:func:`~simindex.ops.queue.sweep`) waits
    for this transaction from here on."""
    conn.execute(
        statement("sync_batch_lock"),
        {"class": BATCH_LOCK_CLASS, "key": target.triggers.build_lock_key},
    )
    rows, failures = _read(conn, target, keys, max_text_bytes, BATCH_BYTES)
    # An unreadable row changed (it was queued): its old fingerprint is wrong now.
    unread: list[Any] = [key for key, _ in failures]
    found = {row[0] for row in rows} | set(unread)
    remove = [key for key in keys if key not in found]
    candidates: list[tuple[Any, str]] = []
    later: list[tuple[Any, int]] = []
    for key, text, size in rows:
        if text is not None:
            candidates.append((key, text))
        elif size is None:
            remove.append(key)
        elif size <= max_text_bytes:
            later.append((key, size))
        else:
            unread.append(key)  # its old fingerprint is wrong now: out of the index
            failures.append((key, over_limit(size, max_text_bytes)))
    del rows
    computed = _Computed(target.spec)
    computed.add(candidates)
    del candidates
    for group, budget in _groups(later, BATCH_BYTES):
        group_rows, group_failures = _read(conn, target, group, max_text_bytes, budget)
        failures += group_failures
        unread += [key for key, _ in group_failures]
        computed.add([(key, text) for key, text, _ in group_rows if text is not None])
        # A row gone meanwhile (none can be: writers wait for the entries this batch holds).
        read = {key for key, _, _ in group_rows} | {key for key, _ in group_failures}
        remove += [key for key in group if key not in read]
    upsert_keys, values = computed.result()
    remove += computed.no_features
    failures += computed.failures
    return Prepared(remove, unread, upsert_keys, values, failures)


def over_limit(size: int, max_text_bytes: int) -> str:
    """The failed item's error of a text that is not read (sync's and build's)."""
    return (
        f"text is {size} bytes, over max_text_bytes={max_text_bytes}; retry with a larger "
        "limit: `simindex sync --retry-failed --max-text-bytes N` "
        "(Python: sync(..., retry_failed=True, max_text_bytes=N))"
    )


def _groups(sized: list[tuple[Any, int]], budget: int) -> Iterator[tuple[list[Any], int]]:
    """Keys in groups whose sizes add up to ``budget`` at most (a larger one alone), and each
    group's total."""
    group: list[Any] = []
    total = 0
    for key, size in sized:
        if group and total + size > budget:
            yield group, total
            group, total = [], 0
        group.append(key)
        total += size
    if group:
        yield group, total


class _Computed:
    """Fingerprints of a batch's texts, computed part by part (the texts of a part are let go
    once it is done)."""

    def __init__(self, spec: IndexSpec) -> None:
        self.spec = spec
        self.keys: list[Any] = []
        self.parts: list[Any] = []
        self.no_features: list[Any] = []
        self.failures: list[tuple[Any, str]] = []

    def add(self, candidates: list[tuple[Any, str]]) -> None:
        if not candidates:
            return
        keys, values, without, failures = _fingerprints(self.spec, candidates)
        self.keys += keys
        self.parts.append(values)
        self.no_features += without
        self.failures += failures

    def result(self) -> tuple[list[Any], Any]:
        if not self.parts:
            _, empty, _, _ = _fingerprints(self.spec, [])
            return [], empty
        return self.keys, np.concatenate(self.parts)


def probe(conn: PgConnection, target: Target) -> None:
    """Read no row of the source, as a batch reads: raises if the table, a column or the right
    to read them is missing (the check of an index marked broken whose queue is empty)."""
    _read(conn, target, [], 0, 0)


def _read(
    conn: PgConnection, target: Target, keys: Sequence[Any], max_text_bytes: int, budget: int
) -> tuple[list[Any], list[tuple[Any, str]]]:
    """(rows as they are now, (key, error) of rows that cannot be read): the batch at once, or,
    when that fails, one row at a time, each in a savepoint. Texts past ``budget`` bytes (see
    ``sync_read``) come as None with their size."""
    source = target.source
    query = statement(
        "sync_read",
        key=sql.Identifier(source.key_column),
        text=sql.Identifier(source.text_column),
        source=source.identifier,
        key_type=target.triggers.key_type,
    )
    with unfiltered(conn, source):
        return _read_rows(conn, query, keys, max_text_bytes, budget)


def _read_rows(
    conn: PgConnection,
    query: sql.Composed,
    keys: Sequence[Any],
    max_text_bytes: int,
    budget: int,
) -> tuple[list[Any], list[tuple[Any, str]]]:
    try:
        with conn.transaction():
            rows = conn.execute(
                query,
                {"keys": key_array(conn, keys), "max_bytes": max_text_bytes, "budget": budget},
            ).fetchall()
        return rows, []
    except psycopg.Error as exc:
        if not is_row_error(exc):
            raise
    rows, failures = [], []
    left = budget  # what the rows read one by one may still bring inline
    for key in keys:
        try:
            with conn.transaction():
                got = conn.execute(
                    query,
                    {
                        "keys": key_array(conn, [key]),
                        "max_bytes": max_text_bytes,
                        "budget": max(left, -1),
                    },
                ).fetchall()
            rows += got
            left -= sum(size for _, text, size in got if text is not None)
        except psycopg.Error as exc:
            if not is_row_error(exc):
                raise
            failures.append((key, f"read: {_describe(exc)}"))
    return rows, failures


def is_row_error(exc: psycopg.Error) -> bool:
    """Whether ``exc`` may be one row's fault (a bad value), not the table's or the server's."""
    if isinstance(exc, psycopg.OperationalError):
        return False
    return (exc.sqlstate or "")[:2] not in _INDEX_ERROR_CLASSES


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
    except psycopg.Error as exc:
        if not is_row_error(exc):
            raise
        # isolate the failing rows below, each in its own savepoint
    failures: list[tuple[Any, str]] = []
    indexed = removed = 0
    for key in remove:
        try:
            with conn.transaction():
                _write_rows(conn, target, [key], [], values[:0], still_failed)
            removed += key not in still_failed
        except psycopg.Error as exc:
            if not is_row_error(exc):
                raise
            failures.append((key, _describe(exc)))
    for position, key in enumerate(keys):
        try:
            with conn.transaction():
                _write_rows(conn, target, [], [key], values[position : position + 1], set())
            indexed += 1
        except psycopg.Error as exc:
            if not is_row_error(exc):
                raise
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
