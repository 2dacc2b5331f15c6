"""What an index costs and how far behind it is: rows now, table sizes, queue length and lag,
failed items, and the worker's last error on it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simindex.db.catalog import (
    DEFAULT_SCHEMA,
    IndexInfo,
    check_name,
    index_names,
    read_index,
    store_of,
)
from simindex.db.connection import Bind, PgConnection, transaction
from simindex.db.statements import statement
from simindex.db.triggers import Triggers


@dataclass(frozen=True, slots=True)
class IndexStats:
    """One index: its catalog row (state, ``broken``, ``last_error``), the bytes each of its
    tables takes (``pg_total_relation_size``, by table name), the keys it holds now, its queued
    keys, the age in seconds of the oldest queued entry (how far the index lags behind its
    table; 0 with an empty queue), its failed items, and the DELETE statements on its table
    the worker has not swept yet (``deletes_waiting``).

    ``rows`` counts the index rows of deleted source rows until the worker's sweep removes
    them (no answer names them meanwhile): leaving them out would cost a join of the whole
    index with its table, as the sweep itself does, on every call."""

    info: IndexInfo
    table_bytes: dict[str, int]
    rows: int
    queued: int
    lag_seconds: float
    failed: int
    deletes_waiting: int = 0

    @property
    def total_bytes(self) -> int:
        return sum(self.table_bytes.values())


def index_stats(
    bind: Bind, names: Sequence[str] | None = None, *, index_schema: str = DEFAULT_SCHEMA
) -> list[IndexStats]:
    """Stats of the named indexes (default: all, by name), read in one transaction.

    Raises :class:`IndexNotFoundError` for a name with no index.
    """
    wanted = [check_name(name) for name in names] if names is not None else None
    with transaction(bind) as conn:
        if wanted is None:
            wanted = index_names(conn, index_schema)
        return [one_index(conn, read_index(conn, index_schema, name)) for name in wanted]


def one_index(conn: PgConnection, info: IndexInfo) -> IndexStats:
    """The stats of the index ``info`` describes."""
    store = store_of(info)
    triggers = Triggers(info.index_schema, info.name, info.source, store)
    tables = [*store.side_tables(), triggers.inbox, triggers.queue, triggers.failed]
    sizes = conn.execute(
        statement("catalog_table_bytes"),
        {"tables": [table.as_string(conn) for table in tables]},
    ).fetchall()
    now = conn.execute(
        statement(
            "stats_now",
            rows=store.side_tables()[0],
            inbox=triggers.inbox,
            queue=triggers.queue,
            failed=triggers.failed,
            deletes=triggers.deletes,
        )
    ).fetchone()
    assert now is not None
    rows, queued, lag, failed, deletes = now
    return IndexStats(
        info,
        {str(table): int(size) for table, size in sizes},
        int(rows),
        int(queued),
        float(lag),
        int(failed),
        int(deletes),
    )
