"""What an index costs and how far behind it is: catalog counts, table sizes, queue lengths."""

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
from simindex.db.connection import Bind, transaction
from simindex.db.statements import statement
from simindex.db.triggers import Triggers


@dataclass(frozen=True, slots=True)
class IndexStats:
    """One index: its catalog row, the bytes each of its tables takes
    (``pg_total_relation_size``, by table name), and its queued keys and failed items."""

    info: IndexInfo
    table_bytes: dict[str, int]
    queued: int
    failed: int

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
        found: list[IndexStats] = []
        for name in wanted:
            info = read_index(conn, index_schema, name)
            store = store_of(info)
            triggers = Triggers(index_schema, name, info.source, store)
            tables = [*store.side_tables(), triggers.queue, triggers.failed]
            sizes = conn.execute(
                statement("catalog_table_bytes"),
                {"tables": [table.as_string(conn) for table in tables]},
            ).fetchall()
            counts = conn.execute(
                statement("sync_counts", queue=triggers.queue, failed=triggers.failed)
            ).fetchone()
            assert counts is not None
            found.append(
                IndexStats(
                    info,
                    {str(table): int(size) for table, size in sizes},
                    int(counts[0]),
                    int(counts[1]),
                )
            )
    return found
