"""A MinHash index in storage format 1: its band table, signature table and SQL functions.

Indexes created by earlier releases keep this form until their next build, which moves them to
format 2 (:mod:`simindex.db.compact_minhash_store`); the compact store reuses the names here.

Leskovec, Rajaraman, Ullman, *Mining of Massive Datasets*, ch. 3.4: documents sharing any
band (all ``rows_per_band`` values equal) are candidates; each candidate is then verified by
the estimated Jaccard similarity of the stored signatures, in SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from psycopg import sql

from simindex.core.bits import to_signed_array
from simindex.core.design import LshDesign
from simindex.db.answers import max_rows, protect_statements
from simindex.db.connection import PgConnection
from simindex.db.copytext import field
from simindex.db.pg_array import BigintArray, key_array, register
from simindex.db.statements import run, statement


@dataclass(frozen=True, slots=True)
class MinHashStore:
    """Names and statements of one MinHash index's objects in ``schema``."""

    schema: str
    name: str
    key_type: str
    design: LshDesign
    num_perm: int
    threshold: float

    array_type: ClassVar[str] = "bigint"
    """The SQL element type of the signature and band key arrays the similar function takes."""

    def _name(self, kind: str, staging: bool) -> str:
        return f"{self.name}_{kind}" + ("_staging" if staging else "")

    def signatures(self, staging: bool = False) -> sql.Identifier:
        return sql.Identifier(self.schema, self._name("signatures", staging))

    def bands(self, staging: bool = False) -> sql.Identifier:
        return sql.Identifier(self.schema, self._name("bands", staging))

    @property
    def similar_function(self) -> sql.Identifier:
        return sql.Identifier(self.schema, f"{self.name}_similar_v1")

    @property
    def similar_key_function(self) -> sql.Identifier:
        return sql.Identifier(self.schema, f"{self.name}_similar_key_v1")

    @property
    def pairs_function(self) -> sql.Identifier:
        return sql.Identifier(self.schema, f"{self.name}_pairs_v1")

    def _key_type(self) -> sql.Composable:
        # format_type output from the catalog: a type name PostgreSQL itself quoted.
        return sql.SQL(self.key_type)

    def create(self, conn: PgConnection, staging: bool = False) -> None:
        run(conn, self.create_statements(staging))

    def create_statements(self, staging: bool = False) -> list[sql.Composed]:
        key_type = self._key_type()
        return [
            statement(
                "minhash_create_signatures", table=self.signatures(staging), key_type=key_type
            ),
            statement("minhash_create_bands", table=self.bands(staging), key_type=key_type),
            *protect_statements(self.schema, self.name, self.signatures(staging)),
            *protect_statements(self.schema, self.name, self.bands(staging)),
        ]

    def create_functions(self, conn: PgConnection) -> None:
        run(conn, self.function_statements())

    def function_statements(self) -> list[sql.Composed]:
        common = {
            "usable": sql.Identifier(self.schema, "source_usable_v1"),
            "index_name": sql.Literal(self.name),
            "key_type": self._key_type(),
            "threshold": sql.Literal(self.threshold),
            "max_rows": max_rows(),
            "signatures": self.signatures(),
            "bands": self.bands(),
        }
        return [
            statement(
                "minhash_similar_function",
                function=self.similar_function,
                num_perm=sql.Literal(float(self.num_perm)),
                num_bands=sql.Literal(self.design.num_bands),
                **common,
            ),
            statement(
                "minhash_similar_key_function",
                function=self.similar_key_function,
                similar=self.similar_function,
                **common,
            ),
            self.pairs_function_statement(),
            statement("pairs_revoke_function", function=self.pairs_function),
        ]

    def pairs_function_statement(self) -> sql.Composed:
        return statement(
            "pairs_function",
            usable=sql.Identifier(self.schema, "source_usable_v1"),
            index_name=sql.Literal(self.name),
            function=self.pairs_function,
            parameter=sql.SQL("threshold"),
            parameter_type=sql.SQL("double precision"),
            default=sql.Literal(self.threshold),
            lowest=sql.Literal(0),
            highest=sql.Literal(1),
            key_type=self._key_type(),
            score=sql.SQL("similarity"),
            score_type=sql.SQL("double precision"),
            query=sql.SQL("\nUNION ALL\n").join(
                self.pairs_query(band, sql.SQL("$1")) for band in range(self.design.num_bands)
            ),
        )

    def pairs_query(
        self,
        band: int,
        threshold: sql.Composable,
        bands: sql.Composable | None = None,
        signatures: sql.Composable | None = None,
    ) -> sql.Composed:
        """All pairs that band ``band`` finds and no earlier band does, verified."""

        def values(of: int) -> tuple[sql.Composable, sql.Composable]:
            start = of * self.design.rows_per_band
            return sql.Literal(start + 1), sql.Literal(start + self.design.rows_per_band)

        earlier = [
            sql.SQL("\n  AND sa.signature[{0}:{1}] <> sb.signature[{0}:{1}]").format(*values(b))
            for b in range(band)
        ]
        low, high = values(band)
        return statement(
            "minhash_pairs",
            bands=bands if bands is not None else self.bands(),
            signatures=signatures if signatures is not None else self.signatures(),
            num_perm=sql.Literal(float(self.num_perm)),
            band=sql.Literal(band),
            low=low,
            high=high,
            earlier=sql.Composed(earlier),
            threshold=threshold,
        )

    def stored_signatures(self, values: NDArray[np.uint64]) -> NDArray[np.int64]:
        """Signature values as stored ``bigint`` values (:mod:`simindex.core.bits`)."""
        return to_signed_array(np.ascontiguousarray(values, dtype=np.uint64))

    def query_arguments(self, values: NDArray[np.uint64]) -> tuple[list[int], list[int]]:
        """The similar function's signature and band key arguments for one signature."""
        hashes = self.design.band_hashes(values[None, :])[0]
        return self.stored_signatures(values).tolist(), hashes.tolist()

    def copy(
        self,
        conn: PgConnection,
        keys: Sequence[object],
        values: NDArray[np.uint64],
        staging: bool = False,
    ) -> None:
        """Write the signatures and band rows of documents (all with features)."""
        fields = [field(key) for key in keys]
        stored = self.stored_signatures(values).tolist()
        signatures = "".join(
            f"{key}\t{{{','.join(map(str, signature))}}}\n"
            for key, signature in zip(fields, stored, strict=True)
        )
        band_hashes = self.design.band_hashes(values).tolist()
        bands = "".join(
            f"{band}\t{value}\t{key}\n"
            for key, hashes in zip(fields, band_hashes, strict=True)
            for band, value in enumerate(hashes)
        )
        cursor = conn.cursor()
        query = statement("minhash_copy_signatures", table=self.signatures(staging))
        with cursor.copy(query) as copy:
            copy.write(signatures)
        with cursor.copy(statement("minhash_copy_bands", table=self.bands(staging))) as copy:
            copy.write(bands)

    def side_tables(self) -> list[sql.Identifier]:
        """The live tables holding this index's rows (what a delete or truncate touches)."""
        return [self.signatures(), self.bands()]

    def upsert(
        self, conn: PgConnection, keys: Sequence[object], values: NDArray[np.uint64]
    ) -> None:
        """Replace the signatures and band rows of ``keys`` (a delete and an insert)."""
        if not keys:
            return
        self.delete(conn, keys)
        register(conn)
        key_type = self._key_type()
        conn.execute(
            statement(
                "minhash_insert_signatures",
                table=self.signatures(),
                key_type=key_type,
                num_perm=sql.Literal(self.num_perm),
            ),
            {"keys": key_array(conn, keys), "values": BigintArray(self.stored_signatures(values))},
        )
        conn.execute(
            statement(
                "minhash_insert_bands",
                table=self.bands(),
                key_type=key_type,
                num_bands=sql.Literal(self.design.num_bands),
            ),
            {"keys": key_array(conn, keys), "hashes": BigintArray(self.design.band_hashes(values))},
        )

    def delete(self, conn: PgConnection, keys: Sequence[object]) -> None:
        """Remove the signatures and band rows of ``keys`` (absent keys are no error)."""
        if keys:
            for table in self.side_tables():
                conn.execute(
                    statement("minhash_delete", table=table, key_type=self._key_type()),
                    {"keys": key_array(conn, keys)},
                )

    def finish(self, conn: PgConnection, staging: bool = False) -> None:
        run(conn, self.finish_statements(staging))

    def finish_statements(self, staging: bool = False) -> list[sql.Composed]:
        bands = self._name("bands", staging)
        return [
            statement(
                "minhash_create_band_index",
                index=sql.Identifier(bands + "_band_hash"),
                table=self.bands(staging),
            ),
            statement(
                "minhash_create_band_key_index",
                index=sql.Identifier(bands + "_key"),
                table=self.bands(staging),
            ),
            *(
                statement("analyze", table=table)
                for table in (self.signatures(staging), self.bands(staging))
            ),
        ]

    def swap_in_staging(self, conn: PgConnection) -> None:
        """Replace the live tables by the staging ones, in the caller's transaction."""
        renames = [
            ("signatures", ""),
            ("signatures", "_pkey"),
            ("bands", ""),
            ("bands", "_band_hash"),
            ("bands", "_key"),
        ]
        conn.execute(statement("drop_table", table=self.signatures()))
        conn.execute(statement("drop_table", table=self.bands()))
        for kind, suffix in renames:
            old = self._name(kind, staging=True) + suffix
            new = sql.Identifier(self._name(kind, staging=False) + suffix)
            name = "rename_index" if suffix else "rename_table"
            target = "index" if suffix else "table"
            conn.execute(statement(name, **{target: sql.Identifier(self.schema, old)}, name=new))

    def drop_staging(self, conn: PgConnection) -> None:
        """Remove what an interrupted build left."""
        conn.execute(statement("drop_table", table=self.signatures(staging=True)))
        conn.execute(statement("drop_table", table=self.bands(staging=True)))

    def drop(self, conn: PgConnection) -> None:
        run(conn, self.drop_statements())

    def drop_statements(self) -> list[sql.Composed]:
        statements = self.function_drop_statements()
        for staging in (True, False):
            statements += self.table_statements(staging)
        return statements

    def table_statements(self, staging: bool) -> list[sql.Composed]:
        """Dropping the live (or staging) tables."""
        return [
            statement("drop_table", table=self.signatures(staging)),
            statement("drop_table", table=self.bands(staging)),
        ]

    def function_drop_statements(self) -> list[sql.Composed]:
        return [
            statement("drop_function", function=function)
            for function in (self.pairs_function, self.similar_key_function, self.similar_function)
        ]

    def check_query(self, parts: dict[str, sql.Composable]) -> sql.Composed:
        """Each source row beside its stored signature and band keys (see ops.check)."""
        return statement(
            "check_minhash_rows", signatures=self.signatures(), bands=self.bands(), **parts
        )

    def stored_form(self, values: NDArray[np.uint64]) -> list[tuple[Any, ...]]:
        """Recomputed values in the shape :meth:`check_query` reads them back."""
        if not len(values):
            return []
        signatures = self.stored_signatures(values).tolist()
        bands = self.design.band_hashes(values).tolist()
        return list(zip(signatures, bands, strict=True))
