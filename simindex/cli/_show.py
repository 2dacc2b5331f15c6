"""``--show COLUMN``: columns of the indexed table printed beside the keys of a result."""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from simindex.errors import SimindexError

if TYPE_CHECKING:
    from simindex.db.catalog import IndexInfo
    from simindex.db.connection import Bind

# The driver and the database layer load when a command runs, not when the parser is made.

_CHUNK = 1000  # keys looked up per query while streaming
_TABLE_WIDTH = 60  # characters of a value in a table for people


def add_show_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--show",
        action="append",
        default=[],
        metavar="COLUMN",
        help=f"print this column of the indexed table beside {what} (repeatable)",
    )


class Shown:
    """Looks up the ``columns`` of the rows of an index's table, by key."""

    def __init__(self, bind: Bind, info: IndexInfo, columns: Sequence[str]) -> None:
        from psycopg import sql

        self.bind = bind
        self.columns = list(columns)
        source = info.source
        self._parts = {
            "key": sql.Identifier(source.key_column),
            "columns": sql.SQL(", ").join(sql.Identifier(column) for column in self.columns),
            "table": sql.Identifier(source.schema, source.table),
        }
        if self.columns:
            self._check(info)

    def _check(self, info: IndexInfo) -> None:
        import psycopg

        from simindex.db.connection import transaction
        from simindex.db.statements import statement

        try:
            with transaction(self.bind) as conn:
                conn.execute(statement("source_columns_check", **self._parts))
        except psycopg.errors.UndefinedColumn as exc:
            raise SimindexError(
                f"--show: {exc.diag.message_primary} (table {info.source.table!r})"
            ) from exc

    def of(self, keys: Iterable[Any]) -> dict[Any, tuple[Any, ...]]:
        """The columns of each key's row (keys with no row are left out)."""
        wanted = list(dict.fromkeys(keys))
        if not self.columns or not wanted:
            return {}
        from simindex.db.connection import transaction
        from simindex.db.statements import statement

        with transaction(self.bind) as conn:
            rows = conn.execute(
                statement("source_columns_of_keys", **self._parts), {"keys": wanted}
            ).fetchall()
        return {row[0]: tuple(row[1:]) for row in rows}

    def values(self, found: dict[Any, tuple[Any, ...]], key: Any) -> tuple[Any, ...]:
        return found.get(key, (None,) * len(self.columns))

    def extended(
        self, rows: Iterable[Sequence[Any]], key_positions: Sequence[int]
    ) -> Iterator[list[Any]]:
        """``rows`` with the columns of the key at each of ``key_positions`` appended, looked
        up a chunk of rows at a time (streams stay streams)."""
        iterator = iter(rows)
        while chunk := list(itertools.islice(iterator, _CHUNK)):
            found = self.of(row[at] for row in chunk for at in key_positions)
            for row in chunk:
                extra = [v for at in key_positions for v in self.values(found, row[at])]
                yield [*row, *extra]


def for_people(value: Any) -> Any:
    """A value cut to one short line, for a table on a terminal."""
    if not isinstance(value, str):
        return value
    text = " ".join(value.split())
    return text if len(text) <= _TABLE_WIDTH else text[: _TABLE_WIDTH - 3].rstrip() + "..."
