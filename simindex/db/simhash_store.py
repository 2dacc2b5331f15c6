"""A SimHash index's side table, its prefix indexes and its SQL functions.

One row per document: the fingerprint (``bigint`` through :mod:`simindex.core.bits`), the
prefix of every Manku table but the first, packed into the smallest integer type that holds
it, and the key (in the source key's type). The first table's prefix is the fingerprint's top
bits, so its covering btree index is on the fingerprint itself; every other table has a
covering index on its prefix column. A query is, per table, one index-only scan on the query's
prefix plus a distance filter -- exact, by the pigeonhole argument of :mod:`simindex.core.design`.
The query lives in a typed plpgsql function per index (plans cached, key returned in its own
type, its side table named so the planner sees its indexes); its checks and scoring are the
static functions of simindex's schema. Python calls the same function.
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
from simindex.db.swap_guard import query_checks, quoted_name

_TOP_BIT = 1 << (BITS - 1)
_PREFIX_TYPES = ((16, "smallint"), (32, "integer"), (64, "bigint"))


def _bigint(bits: int) -> sql.Composable:
    """A 64-bit pattern as a bigint literal (two's complement), safe for any value."""
    value = bits - (1 << BITS) if bits >= _TOP_BIT else bits
    return sql.SQL("{}::bigint").format(sql.Literal(str(value)))


def prefix_type(table: MankuTable) -> tuple[int, str]:
    """The width and name of the smallest integer type holding ``table``'s prefix bits."""
    return next((width, name) for width, name in _PREFIX_TYPES if table.prefix_bits <= width)


def _prefix_moves(table: MankuTable) -> list[tuple[int, int, int]]:
    """(source shift, mask, destination shift) of the prefix blocks, packed at the bottom."""
    low = BITS - table.prefix_bits
    return [(src, mask, dst - low) for src, mask, dst in table.moves[: table.prefix_blocks]]


def prefix_array(table: MankuTable, fingerprints: NDArray[np.uint64]) -> NDArray[np.int64]:
    """The stored prefix of each (unsigned) fingerprint: its prefix bits packed, less half
    the type's range, so that it fits the signed type of :func:`prefix_type`."""
    packed = np.zeros(len(fingerprints), dtype=np.uint64)
    for src, mask, dst in _prefix_moves(table):
        packed |= ((fingerprints >> np.uint64(src)) & np.uint64(mask)) << np.uint64(dst)
    return packed.astype(np.int64) - _offset(table)


def _offset(table: MankuTable) -> int:
    width, _ = prefix_type(table)
    return 1 << (width - 1) if width < BITS else 0  # 33 to 63 bits: a bigint holds them


def _prefix_sql(table: MankuTable, fingerprint: sql.Composable) -> sql.Composable:
    """SQL of :func:`prefix_array` for a stored (order-mapped) fingerprint."""
    unsigned = sql.SQL("({} OPERATOR(pg_catalog.#) {})").format(fingerprint, _bigint(_TOP_BIT))
    parts = [
        sql.SQL(
            "((({} OPERATOR(pg_catalog.>>) {}) OPERATOR(pg_catalog.&) {})"
            " OPERATOR(pg_catalog.<<) {})"
        ).format(unsigned, sql.Literal(src), _bigint(mask), sql.Literal(dst))
        for src, mask, dst in _prefix_moves(table)
    ]
    return sql.SQL("(({}) OPERATOR(pg_catalog.-) {})::{}").format(
        sql.SQL(" OPERATOR(pg_catalog.|) ").join(parts),
        sql.Literal(_offset(table)),
        sql.SQL(prefix_type(table)[1]),
    )


def _key_constraint(staging: bool) -> sql.SQL:
    """A staging table's primary key comes after its load (:meth:`SimHashStore.finish`)."""
    return sql.SQL("NOT NULL" if staging else "PRIMARY KEY")


def _lines(rows: Iterable[tuple[object, ...]]) -> str:
    """(key, integer, ...) rows as COPY text."""
    return "".join(field(row[0]) + "\t" + "\t".join(map(str, row[1:])) + "\n" for row in rows)


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
        """The prefix columns: one per Manku table but the first (whose prefix is the
        fingerprint's top bits, its index on the fingerprint itself)."""
        return [sql.Identifier(f"p{i}") for i in range(1, self.design.table_count)]

    def _prefix_column(self, position: int) -> sql.Identifier:
        return sql.Identifier("fingerprint") if position == 0 else self.columns[position - 1]

    def _static(self, name: str) -> sql.Identifier:
        """One of the static functions of simindex's schema (the baseline migration)."""
        return sql.Identifier(self.schema, name)

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
        prefix_columns = sql.Composed(
            [
                sql.SQL("{} {} NOT NULL,\n    ").format(column, sql.SQL(prefix_type(table)[1]))
                for table, column in zip(self.design.tables[1:], self.columns, strict=True)
            ]
        )
        return [
            statement(
                "simhash_create_table",
                table=self.table(staging),
                key_type=self._key_type(),
                key_constraint=_key_constraint(staging),
                prefix_columns=prefix_columns,
            ),
            *protect_statements(self.schema, self.name, self._table_name(staging)),
        ]

    def create_functions(self, conn: PgConnection) -> None:
        run(conn, self.function_statements())

    def function_statements(self) -> list[sql.Composed]:
        common = {
            "key_type": self._key_type(),
            "max_rows": max_rows(),
            "default_distance": sql.Literal(self.design.max_distance),
            "allowed": self._static("distance_allowed_v1"),
        }
        of_key = statement(
            "simhash_of_key",
            table=self.table(),
            prefixes=sql.Composed([sql.SQL(", s.{}").format(column) for column in self.columns]),
        )
        # The key's own row left out: above the arms where no policy applies (one test), in
        # each arm where one may (int8ne is leakproof: the row is never probed by the policy).
        by_key = [
            self.query(
                sql.SQL("q.fingerprint"),
                None if protected else sql.SQL("\n  AND NOT c.key OPERATOR(pg_catalog.=) row_key"),
                of_key=of_key,
                prefixes=[sql.SQL("q.{}").format(column) for column in self.columns],
                protected=protected,
                other_than=sql.SQL("row_key") if protected else None,
            )
            for protected in (True, False)
        ]
        table_name = quoted_name(self.schema, self._table_name())
        return [
            statement(
                "simhash_near_function",
                function=self.near_function,
                table_name=table_name,
                protected_query=self.query(sql.SQL("$1"), protected=True),
                open_query=self.query(sql.SQL("$1"), protected=False),
                **common,
            ),
            statement(
                "simhash_near_key_function",
                function=self.near_key_function,
                table=self.table(),
                table_name=table_name,
                protected_query=by_key[0],
                open_query=by_key[1],
                **common,
            ),
            statement(
                "pairs_function",
                usable=self._static("source_usable_v1"),
                index_name=sql.Literal(self.name),
                visible=visible_function(self.schema, self.name),
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

    def query(
        self,
        fingerprint: sql.Composable,
        also: sql.Composable | None = None,
        of_key: sql.Composable | None = None,
        prefixes: Sequence[sql.Composable] | None = None,
        *,
        protected: bool,
        other_than: sql.Composable | None = None,
    ) -> sql.Composed:
        """A query function's one statement: its checks, then the arms by ``fingerprint``
        ($2 is max_distance, max_rows the limit; ``also``, more conditions on the rows;
        ``of_key``, a row the arms are lateral to, which ``fingerprint`` and ``prefixes``
        name columns of). ``protected``: for a caller row-level security may apply to (the
        arms' distance test leakproof); ``other_than``: a key each arm leaves out."""
        return statement(
            "simhash_query",
            of_key=sql.Composed([sql.SQL("\n"), of_key, sql.SQL("\nCROSS JOIN LATERAL")])
            if of_key is not None
            else sql.SQL(""),
            arms=self.candidates_query(
                fingerprint, sql.SQL("$2"), prefixes, protected=protected, other_than=other_than
            ),
            distance=self._static("simhash_distance_v1"),
            fingerprint=fingerprint,
            visible=visible_function(self.schema, self.name),
            checks=query_checks(self.schema, self._table_name(), self.name),
            also=also if also is not None else sql.SQL(""),
            limit=sql.SQL("max_rows"),
        )

    def _earlier(self, position: int, left: sql.Composable, right: sql.Composable) -> sql.Composed:
        """Conditions that rule out what an earlier Manku table finds: the two fingerprints
        differ on each earlier table's prefix bits."""
        return sql.Composed(
            [
                sql.SQL(
                    "\n  AND (({} OPERATOR(pg_catalog.#) {}) OPERATOR(pg_catalog.&) {})"
                    " OPERATOR(pg_catalog.<>) 0"
                ).format(left, right, _bigint(other.prefix_mask))
                for other in self.design.tables[:position]
            ]
        )

    def candidates_query(
        self,
        fingerprint: sql.Composable,
        max_distance: sql.Composable,
        prefixes: Sequence[sql.Composable] | None = None,
        *,
        protected: bool = False,
        other_than: sql.Composable | None = None,
    ) -> sql.Composed:
        """One indexed scan per Manku table, appended (the arms never overlap): the keys and
        fingerprints within ``max_distance`` of ``fingerprint``. ``prefixes``: the query's
        prefix of each table but the first, when it has them (else computed from
        ``fingerprint``). ``protected``: the distance tested by within_distance_v1
        (leakproof, so before a row-level security policy), else inlined; ``other_than``: a key
        left out (its test leakproof too)."""
        if protected:
            distance_test = sql.SQL("{}(t.fingerprint, {}, {})").format(
                self._static("within_distance_v1"), fingerprint, max_distance
            )
        else:
            distance_test = sql.SQL("{}(t.fingerprint, {}) OPERATOR(pg_catalog.<=) {}").format(
                self._static("simhash_distance_v1"), fingerprint, max_distance
            )
        arms = []
        for position, table in enumerate(self.design.tables):
            if position == 0:  # the fingerprint's top bits: a range of the fingerprint
                suffix = (1 << (BITS - table.prefix_bits)) - 1
                match = sql.SQL(
                    "t.fingerprint OPERATOR(pg_catalog.>=) ({0} OPERATOR(pg_catalog.&) {1})"
                    "\n  AND t.fingerprint OPERATOR(pg_catalog.<=) ({0} OPERATOR(pg_catalog.|) {2})"
                ).format(fingerprint, _bigint(MAX_UNSIGNED ^ suffix), _bigint(suffix))
            else:
                prefix = (
                    prefixes[position - 1]
                    if prefixes is not None
                    else _prefix_sql(table, fingerprint)
                )
                match = sql.SQL("t.{} OPERATOR(pg_catalog.=) {}").format(
                    self._prefix_column(position), prefix
                )
            arms.append(
                statement(
                    "simhash_candidates",
                    table=self.table(),
                    match=match,
                    distance_test=distance_test,
                    earlier=sql.Composed(
                        [
                            sql.SQL("\n  AND t.key OPERATOR(pg_catalog.<>) {}").format(other_than)
                            if other_than is not None
                            else sql.SQL(""),
                            self._earlier(position, sql.SQL("t.fingerprint"), fingerprint),
                        ]
                    ),
                )
            )
        return sql.SQL("\nUNION ALL\n").join(arms)

    def pairs_query(
        self, position: int, max_distance: sql.Composable, table: sql.Composable | None = None
    ) -> sql.Composed:
        """All pairs that Manku table ``position`` finds and no earlier table does."""
        if position == 0:
            shift = sql.Literal(BITS - self.design.tables[0].prefix_bits)
            same = sql.SQL("(a.fingerprint >> {0}) = (b.fingerprint >> {0})").format(shift)
        else:
            same = sql.SQL("a.{0} = b.{0}").format(self._prefix_column(position))
        return statement(
            "simhash_pairs",
            table=table if table is not None else self.table(),
            distance=self._static("simhash_distance_v1"),
            same_prefix=same,
            max_distance=max_distance,
            earlier=self._earlier(position, sql.SQL("a.fingerprint"), sql.SQL("b.fingerprint")),
        )

    def rows(
        self, keys: Sequence[object], fingerprints: NDArray[np.uint64]
    ) -> Iterable[tuple[object, ...]]:
        """Side-table rows (key, fingerprint, p1, p2, ...) as stored values."""
        columns = [to_signed_array(fingerprints)]
        columns += [prefix_array(t, fingerprints) for t in self.design.tables[1:]]
        return zip(keys, *(column.tolist() for column in columns), strict=True)

    def _column_list(self) -> sql.Composable:
        """``, p1, p2, ...``: the prefix columns after key and fingerprint."""
        return sql.Composed([sql.SQL(", {}").format(column) for column in self.columns])

    def copy(
        self,
        conn: PgConnection,
        rows: Iterable[tuple[object, ...]],
        staging: bool = False,
    ) -> None:
        self.copy_text(conn, [_lines(rows)], staging)

    def copy_lines(self, keys: Sequence[object], fingerprints: NDArray[np.uint64]) -> str:
        """The side-table rows of ``keys`` as COPY text (:meth:`copy_text` writes it); a pure
        function of its arguments, so build's worker processes make it."""
        columns = [to_signed_array(fingerprints)]
        columns += [prefix_array(t, fingerprints) for t in self.design.tables[1:]]
        line = "\t".join(["%s"] * (1 + len(columns))) + "\n"
        values = zip(map(field, keys), *(column.tolist() for column in columns), strict=True)
        return "".join(map(line.__mod__, values))

    def copy_text(self, conn: PgConnection, chunks: Iterable[str], staging: bool = False) -> None:
        """One COPY of rows made by :meth:`copy_lines`."""
        query = statement("simhash_copy", table=self.table(staging), columns=self._column_list())
        with conn.cursor().copy(query) as copy:
            for chunk in chunks:
                copy.write(chunk)

    def side_tables(self) -> list[sql.Identifier]:
        """The live tables holding this index's rows (what a delete or truncate touches)."""
        return [self.table()]

    def json_rows(
        self, keys: Sequence[object], values: NDArray[np.uint64]
    ) -> list[dict[str, object]]:
        """The side table's rows of ``keys`` as JSON objects (the writer's function takes
        them, ``db/sql/session.sql``)."""
        columns = {"fingerprint": to_signed_array(values).tolist()}
        for i, table in enumerate(self.design.tables[1:], start=1):
            columns[f"p{i}"] = prefix_array(table, values).tolist()
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
        for i, table in enumerate(self.design.tables[1:], start=1):
            params[f"p{i}"] = BigintArray(prefix_array(table, values))
        conn.execute(
            statement(
                "simhash_upsert",
                table=self.table(),
                key_type=self._key_type(),
                columns=self._column_list(),
                arrays=sql.Composed(
                    [
                        sql.SQL(", {}::bigint[]").format(sql.Placeholder(f"p{i}", PyFormat.BINARY))
                        for i in range(1, self.design.table_count)
                    ]
                ),
                updates=sql.Composed(
                    [sql.SQL(", {0} = EXCLUDED.{0}").format(column) for column in self.columns]
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
                column=self._prefix_column(position),
                included=sql.SQL("key" if position == 0 else "fingerprint, key"),
            )
            for position in range(self.design.table_count)
        ]
        if staging:
            statements.insert(0, statement("add_primary_key", table=self.table(staging)))
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
