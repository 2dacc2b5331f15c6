"""A SimHash index's side table, its permuted-prefix indexes and its SQL functions.

One row per document: the key (in the source key's type), the fingerprint and one permuted
copy per Manku table, all as ``bigint`` through :mod:`simindex.core.bits`. Each permuted column has
a covering btree index, so a query is, per table, one index-only range scan on the query's
prefix plus a ``bit_count`` filter -- exact, by the pigeonhole argument of
:mod:`simindex.core.design`. The query lives in a typed plpgsql function per index (plans cached,
key returned in its own type); Python calls the same function.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from psycopg import sql
from psycopg.adapt import PyFormat

from simindex.core.bits import BITS, MAX_UNSIGNED, to_signed_array
from simindex.core.design import MankuDesign, MankuTable
from simindex.db.answers import max_rows, protect_statements, visible_function
from simindex.db.connection import PgConnection
from simindex.db.copytext import field
from simindex.db.pg_array import BigintArray, key_array, register
from simindex.db.statements import run, statement
from simindex.db.swap_guard import swap_guard

_TOP_BIT = 1 << (BITS - 1)


def _bigint(bits: int) -> sql.Composable:
    """A 64-bit pattern as a bigint literal (two's complement), safe for any value."""
    value = bits - (1 << BITS) if bits >= _TOP_BIT else bits
    return sql.SQL("{}::bigint").format(sql.Literal(str(value)))


def _permuted_sql(table: MankuTable, fingerprint: sql.Composable) -> sql.Composable:
    """SQL computing ``table.permute`` of a stored (order-mapped) fingerprint, order-mapped."""
    unsigned = sql.SQL("({} # {})").format(fingerprint, _bigint(_TOP_BIT))
    parts = [
        sql.SQL("((({} >> {}) & {}) << {})").format(
            unsigned, sql.Literal(src), _bigint(mask), sql.Literal(dst)
        )
        for src, mask, dst in table.moves
    ]
    return sql.SQL("(({}) # {})").format(sql.SQL(" | ").join(parts), _bigint(_TOP_BIT))


@dataclass(frozen=True, slots=True)
class SimHashStore:
    """Names and statements of one SimHash index's objects in ``schema``."""

    schema: str
    name: str
    key_type: str
    design: MankuDesign

    def table(self, staging: bool = False) -> sql.Identifier:
        return sql.Identifier(self.schema, self._table_name(staging))

    def _table_name(self, staging: bool = False) -> str:
        return f"{self.name}_simhash" + ("_staging" if staging else "")

    def _index_name(self, position: int, staging: bool = False) -> str:
        return f"{self._table_name(staging)}_p{position}"

    @property
    def columns(self) -> list[sql.Identifier]:
        return [sql.Identifier(f"p{i}") for i in range(self.design.table_count)]

    @property
    def near_function(self) -> sql.Identifier:
        return sql.Identifier(self.schema, f"{self.name}_near_v1")

    @property
    def near_key_function(self) -> sql.Identifier:
        return sql.Identifier(self.schema, f"{self.name}_near_key_v1")

    @property
    def pairs_function(self) -> sql.Identifier:
        return sql.Identifier(self.schema, f"{self.name}_pairs_v1")

    def _key_type(self) -> sql.Composable:
        # format_type output from the catalog: a type name PostgreSQL itself quoted.
        return sql.SQL(self.key_type)

    def create(self, conn: PgConnection, staging: bool = False) -> None:
        """The empty side table (prefix indexes come after the load, see :meth:`finish`)."""
        run(conn, self.create_statements(staging))

    def create_statements(self, staging: bool = False) -> list[sql.Composed]:
        prefix_columns = sql.SQL(",\n    ").join(
            sql.SQL("{} bigint NOT NULL").format(column) for column in self.columns
        )
        return [
            statement(
                "simhash_create_table",
                table=self.table(staging),
                key_type=self._key_type(),
                prefix_columns=prefix_columns,
            ),
            *protect_statements(self.schema, self.name, self._table_name(staging)),
        ]

    def create_functions(self, conn: PgConnection) -> None:
        run(conn, self.function_statements())

    def function_statements(self) -> list[sql.Composed]:
        usable = {
            "usable": sql.Identifier(self.schema, "source_usable_v1"),
            "index_name": sql.Literal(self.name),
            "visible": visible_function(self.schema, self.name),
        }
        return [
            statement(
                "simhash_near_function",
                **usable,
                guard=swap_guard(self.schema, self._table_name(), self.near_function, 3, self.name),
                function=self.near_function,
                key_type=self._key_type(),
                max_rows=max_rows(),
                default_distance=sql.Literal(self.design.max_distance),
                query=self.candidates_query(sql.SQL("$1"), sql.SQL("$2")),
            ),
            statement(
                "simhash_near_key_function",
                **usable,
                function=self.near_key_function,
                key_type=self._key_type(),
                max_rows=max_rows(),
                default_distance=sql.Literal(self.design.max_distance),
                table=self.table(),
                near=self.near_function,
            ),
            statement(
                "pairs_function",
                **usable,
                function=self.pairs_function,
                parameter=sql.SQL("max_distance"),
                parameter_type=sql.SQL("integer"),
                default=sql.Literal(self.design.max_distance),
                lowest=sql.Literal(0),
                highest=sql.Literal(self.design.max_distance),
                key_type=self._key_type(),
                score=sql.SQL("distance"),
                score_type=sql.SQL("integer"),
                query=sql.SQL("\nUNION ALL\n").join(
                    self.pairs_query(position, sql.SQL("$1"))
                    for position in range(self.design.table_count)
                ),
            ),
            statement("pairs_revoke_function", function=self.pairs_function),
        ]

    def candidates_query(
        self, fingerprint: sql.Composable, max_distance: sql.Composable
    ) -> sql.Composed:
        """The UNION of one indexed range scan per Manku table."""
        arms = []
        for table, column in zip(self.design.tables, self.columns, strict=True):
            suffix = (1 << (BITS - table.prefix_bits)) - 1
            low = sql.SQL("({} & {})").format(
                _permuted_sql(table, fingerprint), _bigint(MAX_UNSIGNED ^ suffix)
            )
            high = sql.SQL("({} | {})").format(low, _bigint(suffix))
            arms.append(
                statement(
                    "simhash_candidates",
                    table=self.table(),
                    column=column,
                    fingerprint=fingerprint,
                    low=low,
                    high=high,
                    max_distance=max_distance,
                    within=sql.Identifier(self.schema, "within_distance_v1"),
                )
            )
        return sql.SQL("\nUNION\n").join(arms)

    def pairs_query(
        self, position: int, max_distance: sql.Composable, table: sql.Composable | None = None
    ) -> sql.Composed:
        """All pairs that Manku table ``position`` finds and no earlier table does."""
        tables = self.design.tables
        earlier = [
            sql.SQL("\n  AND ((a.fingerprint # b.fingerprint) & {}) <> 0").format(
                _bigint(other.prefix_mask)
            )
            for other in tables[:position]
        ]
        return statement(
            "simhash_pairs",
            table=table if table is not None else self.table(),
            column=self.columns[position],
            shift=sql.Literal(BITS - tables[position].prefix_bits),
            max_distance=max_distance,
            earlier=sql.Composed(earlier),
        )

    def rows(
        self, keys: Sequence[object], fingerprints: NDArray[np.uint64]
    ) -> Iterable[tuple[object, ...]]:
        """Side-table rows (key, fingerprint, p0, p1, ...) as stored ``bigint`` values."""
        columns = [to_signed_array(fingerprints)]
        columns += [to_signed_array(t.permute_array(fingerprints)) for t in self.design.tables]
        return zip(keys, *(column.tolist() for column in columns), strict=True)

    def copy(
        self,
        conn: PgConnection,
        rows: Iterable[tuple[object, ...]],
        staging: bool = False,
    ) -> None:
        query = statement(
            "simhash_copy", table=self.table(staging), columns=sql.SQL(", ").join(self.columns)
        )
        lines = "".join(field(row[0]) + "\t" + "\t".join(map(str, row[1:])) + "\n" for row in rows)
        with conn.cursor().copy(query) as copy:
            copy.write(lines)

    def side_tables(self) -> list[sql.Identifier]:
        """The live tables holding this index's rows (what a delete or truncate touches)."""
        return [self.table()]

    def json_rows(
        self, keys: Sequence[object], values: NDArray[np.uint64]
    ) -> list[dict[str, object]]:
        """The side table's rows of ``keys`` as JSON objects (the writer's function takes
        them, ``db/sql/session.sql``)."""
        columns = {"fingerprint": to_signed_array(values).tolist()}
        for i, table in enumerate(self.design.tables):
            columns[f"p{i}"] = to_signed_array(table.permute_array(values)).tolist()
        return [
            {"key": key, **{column: each[n] for column, each in columns.items()}}
            for n, key in enumerate(keys)
        ]

    def upsert(
        self, conn: PgConnection, keys: Sequence[object], values: NDArray[np.uint64]
    ) -> None:
        """Write (or overwrite) the rows of ``keys`` with these fingerprints, in one statement."""
        if not keys:
            return
        register(conn)
        params: dict[str, object] = {
            "keys": key_array(conn, keys),
            "fingerprints": BigintArray(to_signed_array(values)),
        }
        for i, table in enumerate(self.design.tables):
            params[f"p{i}"] = BigintArray(to_signed_array(table.permute_array(values)))
        conn.execute(
            statement(
                "simhash_upsert",
                table=self.table(),
                key_type=self._key_type(),
                columns=sql.SQL(", ").join(self.columns),
                arrays=sql.SQL(", ").join(
                    [
                        sql.SQL("{}::bigint[]").format(sql.Placeholder(f"p{i}", PyFormat.BINARY))
                        for i in range(self.design.table_count)
                    ]
                ),
                updates=sql.SQL(", ").join(
                    sql.SQL("{0} = EXCLUDED.{0}").format(column) for column in self.columns
                ),
            ),
            params,
        )

    def delete(self, conn: PgConnection, keys: Sequence[object]) -> None:
        """Remove the rows of ``keys`` (absent keys are no error)."""
        if keys:
            conn.execute(
                statement("simhash_delete", table=self.table(), key_type=self._key_type()),
                {"keys": key_array(conn, keys)},
            )

    def finish(self, conn: PgConnection, staging: bool = False) -> None:
        """Prefix indexes, built once after a load (faster than maintaining them row by row)."""
        run(conn, self.finish_statements(staging))

    def finish_statements(self, staging: bool = False) -> list[sql.Composed]:
        statements = [
            statement(
                "simhash_create_prefix_index",
                index=sql.Identifier(self._index_name(position, staging)),
                table=self.table(staging),
                column=column,
            )
            for position, column in enumerate(self.columns)
        ]
        return [*statements, statement("analyze", table=self.table(staging))]

    def swap_in_staging(self, conn: PgConnection) -> None:
        """Replace the live table by the freshly built staging one, in the caller's transaction."""
        conn.execute(statement("drop_table", table=self.table()))
        conn.execute(
            statement(
                "rename_table",
                table=self.table(staging=True),
                name=sql.Identifier(self._table_name()),
            )
        )
        for position in range(self.design.table_count):
            conn.execute(
                statement(
                    "rename_index",
                    index=sql.Identifier(self.schema, self._index_name(position, staging=True)),
                    name=sql.Identifier(self._index_name(position)),
                )
            )
        conn.execute(
            statement(
                "rename_index",
                index=sql.Identifier(self.schema, f"{self._table_name(staging=True)}_pkey"),
                name=sql.Identifier(f"{self._table_name()}_pkey"),
            )
        )

    def drop_staging(self, conn: PgConnection) -> None:
        """Remove what an interrupted build left."""
        conn.execute(statement("drop_table", table=self.table(staging=True)))

    def drop(self, conn: PgConnection) -> None:
        run(conn, self.drop_statements())

    def drop_statements(self) -> list[sql.Composed]:
        tables = [statement("drop_table", table=self.table(staging)) for staging in (True, False)]
        return self.function_drop_statements() + tables

    def function_drop_statements(self) -> list[sql.Composed]:
        return [
            statement("drop_function", function=function)
            for function in (self.pairs_function, self.near_key_function, self.near_function)
        ]

    def table_statements(self, staging: bool) -> list[sql.Composed]:
        """Dropping the live (or staging) table."""
        return [statement("drop_table", table=self.table(staging))]
