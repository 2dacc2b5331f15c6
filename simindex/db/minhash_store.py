"""A MinHash index: one table, ``<name>_minhash``, one row per document, and its SQL functions.

The row holds the key, the hash of the shingle set (``set_hash``), one ``integer`` band key
column per LSH band (``b0``, ``b1``, ...), each with a plain btree -- the same shape as a SimHash
side table's permuted-prefix columns; the first band's on ``(b0, set_hash, key)``, which also
finds the rows of a set -- and a one-bit sketch (``bit(sketch_bits)``). A query is
one BitmapOr over the band indexes, so each candidate row is read once, then scored in SQL by
``bit_count`` of the XOR of two sketches (``minhash_similarity_v1``). See
:mod:`simindex.core.packing` for the stored values.

Leskovec, Rajaraman, Ullman, *Mining of Massive Datasets*, ch. 3.4: documents sharing any
band (all ``rows_per_band`` values equal) are candidates; Li and König, "b-Bit Minwise
Hashing", WWW 2010: each candidate is scored from one bit of many more values.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from psycopg import sql

from simindex.core.design import LshDesign
from simindex.core.packing import StoredRows, sketch_digits, stored_rows
from simindex.db.answers import (
    max_rows,
    protect_statements,
    visible_function,
    visible_key_function,
)
from simindex.db.connection import PgConnection
from simindex.db.copytext import field
from simindex.db.pg_array import BigintArray, key_array, register
from simindex.db.statements import run, statement
from simindex.db.swap_guard import query_checks, quoted_name, swap_guard


@dataclass(frozen=True, slots=True)
class MinHashStore:
    """Names and statements of one MinHash index's objects in ``schema``."""

    schema: str
    name: str
    key_type: str
    design: LshDesign
    num_perm: int
    threshold: float
    sketch_bits: int

    def _name(self, kind: str, staging: bool) -> str:
        return f"{self.name}_{kind}" + ("_staging" if staging else "")

    @property
    def similar_function(self) -> sql.Identifier:
        return sql.Identifier(self.schema, f"{self.name}_similar_v1")

    @property
    def similar_key_function(self) -> sql.Identifier:
        return sql.Identifier(self.schema, f"{self.name}_similar_key_v1")

    @property
    def pairs_function(self) -> sql.Identifier:
        return sql.Identifier(self.schema, f"{self.name}_pairs_v1")

    @property
    def similarity(self) -> sql.Identifier:
        """The schema-level scoring function (the baseline migration's)."""
        return sql.Identifier(self.schema, "minhash_similarity_v1")

    def _key_type(self) -> sql.Composable:
        # format_type output from the catalog: a type name PostgreSQL itself quoted.
        return sql.SQL(self.key_type)

    def create(self, conn: PgConnection, staging: bool = False) -> None:
        run(conn, self.create_statements(staging))

    def create_functions(self, conn: PgConnection) -> None:
        run(conn, self.function_statements())

    def _usable(self) -> dict[str, sql.Composable]:
        return {
            "usable": sql.Identifier(self.schema, "source_usable_v1"),
            "index_name": sql.Literal(self.name),
            "visible": visible_function(self.schema, self.name),
        }

    def pairs_function_statement(self) -> sql.Composed:
        return statement(
            "minhash_pairs_function",
            **self._usable(),
            function=self.pairs_function,
            threshold=sql.Literal(self.threshold),
            key_type=self._key_type(),
            pairs=sql.Identifier(self.schema, "minhash_pairs_of_table_v1"),
            table_name=quoted_name(self.schema, self._name("minhash", False)),
            num_bands=sql.Literal(self.design.num_bands),
        )

    def finish(self, conn: PgConnection, staging: bool = False) -> None:
        run(conn, self.finish_statements(staging))

    def drop(self, conn: PgConnection) -> None:
        run(conn, self.drop_statements())

    def drop_statements(self) -> list[sql.Composed]:
        statements = self.function_drop_statements()
        for staging in (True, False):
            statements += self.table_statements(staging)
        return statements

    def function_drop_statements(self) -> list[sql.Composed]:
        return [
            statement("drop_function", function=function)
            for function in (self.pairs_function, self.similar_key_function, self.similar_function)
        ]

    def table(self, staging: bool = False) -> sql.Identifier:
        return sql.Identifier(self.schema, self._name("minhash", staging))

    @property
    def columns(self) -> list[sql.Identifier]:
        return [sql.Identifier(f"b{band}") for band in range(self.design.num_bands)]

    def _index_name(self, band: int, staging: bool = False) -> str:
        return f"{self._name('minhash', staging)}_b{band}"

    def create_statements(self, staging: bool = False) -> list[sql.Composed]:
        band_columns = sql.SQL(",\n    ").join(
            sql.SQL("{} integer NOT NULL").format(column) for column in self.columns
        )
        return [
            statement(
                "minhash_create_table",
                table=self.table(staging),
                key_type=self._key_type(),
                key_constraint=sql.SQL("NOT NULL" if staging else "PRIMARY KEY"),
                band_columns=band_columns,
                sketch_bits=sql.Literal(self.sketch_bits),
            ),
            *protect_statements(self.schema, self.name, self._name("minhash", staging)),
        ]

    def _any_band(self, band_keys: str) -> sql.Composed:
        """A row shares a band key with ``band_keys`` (an array, by its SQL name)."""
        return sql.SQL(" OR ").join(
            sql.SQL("c.{} OPERATOR(pg_catalog.=) {}[{}]").format(
                column, sql.SQL(band_keys), sql.Literal(band + 1)
            )
            for band, column in enumerate(self.columns)
        )

    def _key_query(self, protected: bool) -> sql.Composed:
        """A query by key in one statement: the key's row, the rows of its own set, then the
        band candidates, filtered by minhash_similarity_v1 (leakproof) where row-level security
        may apply (``protected``), else by the estimate in the plan."""
        table = self.table()
        parts = {
            "estimate": statement("minhash_estimate", a=sql.SQL("c.sketch"), b=sql.SQL("s.sketch")),
            "table": table,
            "any_band": sql.SQL(" OR ").join(
                sql.SQL("c.{0} OPERATOR(pg_catalog.=) s.{0}").format(column)
                for column in self.columns
            ),
        }
        if protected:
            scored = statement("minhash_key_scored", similarity=self.similarity, **parts)
        else:
            scored = statement("minhash_key_scored_open", **parts)
        return statement(
            "minhash_key_query",
            table=table,
            scored=scored,
            checks=self._key_checks(),
            visible_key=visible_key_function(self.schema, self.name),
        )

    def _key_checks(self) -> sql.Composed:
        return query_checks(self.schema, self._name("minhash", False), self.name)

    def function_statements(self) -> list[sql.Composed]:
        return [
            statement(
                "minhash_similar_function",
                **self._usable(),
                guard=swap_guard(
                    self.schema, self._name("minhash", False), self.similar_function, 5, self.name
                ),
                function=self.similar_function,
                key_type=self._key_type(),
                max_rows=max_rows(),
                threshold=sql.Literal(self.threshold),
                table=self.table(),
                sketch_bits=sql.Literal(self.sketch_bits),
                num_bands=sql.Literal(self.design.num_bands),
                similarity=self.similarity,
                any_band=self._any_band("$2"),
                visible_key=visible_key_function(self.schema, self.name),
            ),
            statement(
                "minhash_similar_key_function",
                function=self.similar_key_function,
                key_type=self._key_type(),
                max_rows=max_rows(),
                threshold=sql.Literal(self.threshold),
                table_name=quoted_name(self.schema, self._name("minhash", False)),
                checks=self._key_checks(),
                protected_query=self._key_query(protected=True),
                open_query=self._key_query(protected=False),
            ),
            self.pairs_function_statement(),
            statement("pairs_revoke_function", function=self.pairs_function),
        ]

    def pairs_query(
        self,
        band: int,
        threshold: sql.Composable,
        signatures: sql.Composable | None = None,
    ) -> sql.Composed:
        """All pairs that band ``band`` finds and no earlier band does, scored; ``signatures``
        names another table of the same columns (the representatives of identical rows)."""
        earlier = [sql.SQL("\n  AND a.{0} <> b.{0}").format(self.columns[b]) for b in range(band)]
        return statement(
            "minhash_pairs",
            table=signatures if signatures is not None else self.table(),
            column=self.columns[band],
            similarity=self.similarity,
            earlier=sql.Composed(earlier),
            threshold=threshold,
        )

    def stored(self, values: NDArray[np.uint64]) -> StoredRows:
        """What the table holds of (documents x row width) stored rows
        (:meth:`~simindex.core.minhash.MinHasher.rows`)."""
        return stored_rows(self.design, np.atleast_2d(values), self.sketch_bits)

    def query_arguments(self, values: NDArray[np.uint64]) -> tuple[str, list[int], int]:
        """(sketch, band keys, set hash) of one stored row, as the query function takes them."""
        rows = self.stored(values[None, :])
        return rows.sketches[0], rows.bands[0].tolist(), int(rows.set_hashes[0])

    def copy(
        self,
        conn: PgConnection,
        keys: Sequence[object],
        values: NDArray[np.uint64],
        staging: bool = False,
    ) -> None:
        self.copy_text(conn, [self.copy_lines(keys, values)], staging)

    def copy_lines(self, keys: Sequence[object], values: NDArray[np.uint64]) -> str:
        """The rows of ``keys`` as COPY text (:meth:`copy_text` writes it); a pure function of
        its arguments, so build's worker processes make it."""
        rows = self.stored(values)
        num_bands = self.design.num_bands
        line = "%s\t%d\t" + "%d\t" * num_bands + "%s\n"
        bands = rows.bands.ravel().tolist()
        return "".join(
            [
                line % (field(key), set_hash, *bands[at : at + num_bands], sketch)
                for key, set_hash, sketch, at in zip(
                    keys,
                    rows.set_hashes.tolist(),
                    rows.sketches,
                    range(0, len(bands), num_bands),
                    strict=True,
                )
            ]
        )

    def copy_text(self, conn: PgConnection, chunks: Iterable[str], staging: bool = False) -> None:
        """One COPY of rows made by :meth:`copy_lines`, in the order of their first band key
        and set hash: the rows of one set (a template's copies) and rows sharing a band key
        fill pages together, so a query reads its candidates from a few pages, not one page
        each (a build's COPY takes 32,768 rows)."""
        query = statement(
            "minhash_copy", table=self.table(staging), columns=sql.SQL(", ").join(self.columns)
        )
        lines = [line for chunk in chunks for line in chunk.splitlines(keepends=True)]
        lines.sort(key=_band_order)
        with conn.cursor().copy(query) as copy:
            copy.write("".join(lines))

    def side_tables(self) -> list[sql.Identifier]:
        return [self.table()]

    def json_rows(
        self, keys: Sequence[object], values: NDArray[np.uint64]
    ) -> list[dict[str, object]]:
        """The side table's rows of ``keys`` as JSON objects (the writer's function takes
        them, ``db/sql/session.sql``)."""
        result: list[dict[str, object]] = []
        if not keys:
            return result
        rows = self.stored(values)
        for key, set_hash, bands, sketch in zip(
            keys, rows.set_hashes.tolist(), rows.bands.tolist(), rows.sketches, strict=True
        ):
            row: dict[str, object] = {"key": key, "set_hash": set_hash, "sketch": sketch}
            row.update((f"b{band}", value) for band, value in enumerate(bands))
            result.append(row)
        return result

    def upsert(
        self, conn: PgConnection, keys: Sequence[object], values: NDArray[np.uint64]
    ) -> None:
        """Replace the rows of ``keys`` (a delete and an insert)."""
        if not keys:
            return
        self.delete(conn, keys)
        register(conn)
        rows = self.stored(values)
        num_bands = self.design.num_bands
        band_values = sql.SQL(", ").join(
            sql.SQL("h.b[(u.n - 1) * {} + {}]::integer").format(
                sql.Literal(num_bands), sql.Literal(band + 1)
            )
            for band in range(num_bands)
        )
        conn.execute(
            statement(
                "minhash_insert",
                table=self.table(),
                key_type=self._key_type(),
                columns=sql.SQL(", ").join(self.columns),
                band_values=band_values,
            ),
            {
                "keys": key_array(conn, keys),
                "set_hashes": rows.set_hashes.tolist(),
                "sketches": rows.sketches,
                "bands": BigintArray(rows.bands.astype(np.int64)),
            },
        )

    def delete(self, conn: PgConnection, keys: Sequence[object]) -> None:
        if keys:
            conn.execute(
                statement("minhash_delete", table=self.table(), key_type=self._key_type()),
                {"keys": key_array(conn, keys)},
            )

    def finish_statements(self, staging: bool = False) -> list[sql.Composed]:
        # The first band's index holds the rows of each set too (minhash_create_set_index).
        first, *others = self.columns
        indexes = [
            statement(
                "minhash_create_set_index",
                index=sql.Identifier(self._index_name(0, staging)),
                table=self.table(staging),
                column=first,
            ),
            *(
                statement(
                    "minhash_create_band_index",
                    index=sql.Identifier(self._index_name(band, staging)),
                    table=self.table(staging),
                    column=column,
                )
                for band, column in enumerate(others, start=1)
            ),
        ]
        if staging:  # its primary key after the load: one sort, not an insert a row
            indexes.insert(0, statement("add_primary_key", table=self.table(staging)))
        return [*indexes, statement("analyze", table=self.table(staging))]

    def swap_in_staging(self, conn: PgConnection) -> None:
        conn.execute(statement("drop_table", table=self.table()))
        conn.execute(
            statement(
                "rename_table",
                table=self.table(staging=True),
                name=sql.Identifier(self._name("minhash", False)),
            )
        )
        renames = [
            (self._index_name(b, True), self._index_name(b)) for b in range(len(self.columns))
        ]
        renames.append(
            (self._name("minhash", True) + "_pkey", self._name("minhash", False) + "_pkey")
        )
        for old, new in renames:
            conn.execute(
                statement(
                    "rename_index",
                    index=sql.Identifier(self.schema, old),
                    name=sql.Identifier(new),
                )
            )

    def drop_staging(self, conn: PgConnection) -> None:
        conn.execute(statement("drop_table", table=self.table(staging=True)))

    def table_statements(self, staging: bool) -> list[sql.Composed]:
        return [statement("drop_table", table=self.table(staging))]

    def check_query(self, parts: dict[str, sql.Composable]) -> sql.Composed:
        return statement(
            "minhash_check_rows",
            table=self.table(),
            band_columns=sql.SQL(", ").join(sql.SQL("g.{}").format(c) for c in self.columns),
            **parts,
        )

    def stored_form(self, values: NDArray[np.uint64]) -> list[tuple[Any, ...]]:
        """Rows as :meth:`check_query` reads them back: (set hash, band keys, sketch)."""
        if not len(values):
            return []
        rows = self.stored(values)
        return list(
            zip(
                rows.set_hashes.tolist(),
                rows.bands.tolist(),
                [sketch_digits(sketch) for sketch in rows.sketches],
                strict=True,
            )
        )


def _band_order(line: str) -> tuple[int, int]:
    """(first band key, set hash) of a COPY line of :meth:`MinHashStore.copy_lines` (key,
    set hash, band keys, sketch: the key's text escapes its tabs)."""
    _, set_hash, first_band, _ = line.split("\t", 3)
    return int(first_band), int(set_hash)
