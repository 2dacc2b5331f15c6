"""Check an index against a recomputation over its source table, and repair what differs.

A check reads every source row (or a Bernoulli sample of them) beside what the index stores for
it, recomputes the fingerprint from the text and sorts each key into one of:

* **missing**: the row has features but the index has nothing for it;
* **stale**: the index holds a value other than the recomputed one (for MinHash: the signature
  or any band row);
* **orphaned**: the index holds the key, but the row is gone or has no features any more
  (NULL, empty, whitespace only).

Rows changed since the last sync are legitimately missing or stale until a worker processes
them; the report counts the queue and the failed items so the numbers can be read. Everything
is read in one snapshot (REPEATABLE READ) unless the caller hands in a Connection that already
began its transaction. A text over any size is recomputed here (slowly for huge ones), so a
text the worker refused for its size shows as missing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from simindex.core.fingerprints import fingerprint_batch
from simindex.db.catalog import DEFAULT_SCHEMA, check_name, read_index
from simindex.db.connection import Bind, PgConnection, transaction
from simindex.db.minhash_store import MinHashStore
from simindex.db.privileges import superuser_warning_off
from simindex.db.source import key_texts, lenient_keys, refuse_policies
from simindex.db.statements import statement
from simindex.errors import IndexBrokenError
from simindex.ops.queue import Target, requeue, target_unlocked
from simindex.ops.sync import DEFAULT_BATCH_SIZE, sync

_FETCH_ROWS = 2000


@dataclass(frozen=True, slots=True)
class CheckReport:
    """What :func:`check` found: keys missing from the index, stale in it and orphaned in it,
    how many source rows were compared, and how many keys were queued or failed meanwhile."""

    checked: int
    missing: list[Any]
    stale: list[Any]
    orphaned: list[Any]
    queued: int
    failed: int
    broken: str | None = None
    """The sync worker's last error on this index while it marks the index broken."""

    @property
    def ok(self) -> bool:
        """Whether the index matched the recomputation exactly."""
        return not (self.missing or self.stale or self.orphaned)


def check(
    bind: Bind,
    name: str,
    *,
    sample: float | None = None,
    index_schema: str = DEFAULT_SCHEMA,
) -> CheckReport:
    """Compare index ``name`` with a recomputation over its source table.

    Parameters:
        sample: a fraction in (0, 1]: compare about that share of the source rows, and look for
            orphans among that share of the index rows (``TABLESAMPLE BERNOULLI``).
    """
    percent = _percent(sample)
    check_name(name)
    with transaction(bind) as conn:
        if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            conn.execute(statement("check_snapshot"))
        target = target_unlocked(conn, index_schema, name, lock_table=True)
        info = read_index(conn, index_schema, name)
        counts = conn.execute(
            statement(
                "sync_counts",
                inbox=target.triggers.inbox,
                queue=target.triggers.queue,
                failed=target.triggers.failed,
            )
        ).fetchone()
        assert counts is not None
        sampled = (
            statement("check_sample", percent=sql.Literal(percent)) if percent else sql.SQL("")
        )
        missing: list[Any] = []
        stale: list[Any] = []
        orphaned: list[Any] = []
        checked = 0
        # Every row, and no policy of the source's run as the checker (simindex's own tables'
        # policies apply: they show a worker every row).
        refuse_policies(conn, target.source)
        for keys, texts, stored in _rows(conn, target, sampled):
            checked += len(keys)
            values, present = fingerprint_batch(target.spec.to_json(), texts)
            expected = _stored_form(target, values)
            for position, key in enumerate(keys):
                held = stored[position]
                if not present[position]:
                    if held is not None:
                        orphaned.append(key)
                elif held is None:
                    missing.append(key)
                elif held != expected[position]:
                    stale.append(key)
        for table in target.store.side_tables():
            orphans = conn.cursor()
            lenient_keys(orphans)
            rows = orphans.execute(
                statement(
                    "check_orphans",
                    table=table,
                    source=target.source.identifier,
                    key=sql.Identifier(target.source.key_column),
                    sample=sampled,
                )
            ).fetchall()
            known = set(orphaned)
            for (key,) in rows:
                if key not in known:
                    orphaned.append(key)
                    known.add(key)
    broken = (info.last_error or "") if info.broken else None
    return CheckReport(checked, missing, stale, orphaned, int(counts[0]), int(counts[1]), broken)


def repair(
    bind: Bind,
    name: str,
    *,
    sample: float | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    index_schema: str = DEFAULT_SCHEMA,
) -> CheckReport:
    """Check index ``name`` (see :func:`check`) and fix every key found wrong: they are queued
    and the queue is drained, so a repair is as safe beside running workers and writers as a
    sync. Returns what the check found; keys that fail to process land in the failed items."""
    report = check(bind, name, sample=sample, index_schema=index_schema)
    wrong = report.missing + report.stale + report.orphaned
    if wrong:
        with transaction(bind) as conn:
            requeue(conn, target_unlocked(conn, index_schema, name), key_texts(wrong))
    with superuser_warning_off("repair"):  # about a worker, which repair is not
        synced = sync(bind, [name], batch_size=batch_size, index_schema=index_schema)
    if name in synced.broken:
        raise IndexBrokenError(f"index {name!r} is broken: {synced.broken[name]}")
    return report


def _percent(sample: float | None) -> float | None:
    if sample is None:
        return None
    if isinstance(sample, bool) or not isinstance(sample, (int, float)):
        raise TypeError(f"sample must be a number, got {type(sample).__name__}")
    if not 0.0 < sample <= 1.0:
        raise ValueError(f"sample must be a fraction in (0, 1], got {sample}")
    return None if sample == 1.0 else float(sample) * 100.0


def _rows(
    conn: PgConnection, target: Target, sampled: sql.Composable
) -> Iterator[tuple[list[Any], list[str | None], list[Any]]]:
    """(keys, texts, what the index holds or None) in batches."""
    source = target.source
    parts = {
        "key": sql.Identifier(source.key_column),
        "text": sql.Identifier(source.text_column),
        "source": source.identifier,
        "sample": sampled,
    }
    store = target.store
    if isinstance(store, MinHashStore):
        query = store.check_query(parts)
    else:
        query = statement(
            "check_simhash_rows",
            table=store.table(),
            stored_columns=sql.SQL(", ").join([sql.SQL("i.{}").format(c) for c in store.columns]),
            **parts,
        )
    with conn.cursor(name="simindex_check") as cursor:
        lenient_keys(cursor)
        cursor.execute(query)
        while rows := cursor.fetchmany(_FETCH_ROWS):
            yield (
                [row[0] for row in rows],
                [row[1] for row in rows],
                [None if row[2] is None else tuple(row[2:]) for row in rows],
            )


def _stored_form(target: Target, values: Any) -> Sequence[tuple[Any, ...]]:
    """Recomputed values in the shape :func:`_rows` reads them back."""
    store = target.store
    if isinstance(store, MinHashStore):
        return store.stored_form(values)
    rows = store.rows([None] * len(values), values)
    return [tuple(row[1:]) for row in rows]
