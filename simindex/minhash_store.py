"""A MinHash index's band table, signature table and SQL functions.

Leskovec, Rajaraman, Ullman, *Mining of Massive Datasets*, ch. 3.4: documents sharing any
band (all ``rows_per_band`` values equal) are candidates; each candidate is then verified by
the estimated Jaccard similarity of the stored signatures, in SQL.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from psycopg import sql

from simindex.bits import to_signed_array
from simindex.design import LshDesign
from simindex.sql import PgConnection, statement


@dataclass(frozen=True, slots=True)
class MinHashStore:
    """Names and statements of one MinHash index's objects in ``schema``."""

    schema: str
    name: str
    key_type: str
    design: LshDesign
    num_perm: int
    threshold: float

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

    def _key_type(self) -> sql.Composable:
        # format_type output from the catalog: a type name PostgreSQL itself quoted.
        return sql.SQL(self.key_type)

    def create(self, conn: PgConnection, staging: bool = False) -> None:
        key_type = self._key_type()
        conn.execute(
            statement(
                "minhash_create_signatures", table=self.signatures(staging), key_type=key_type
            )
        )
        conn.execute(
            statement("minhash_create_bands", table=self.bands(staging), key_type=key_type)
        )

    def create_functions(self, conn: PgConnection) -> None:
        common = {
            "key_type": self._key_type(),
            "threshold": sql.Literal(self.threshold),
            "signatures": self.signatures(),
            "bands": self.bands(),
        }
        conn.execute(
            statement(
                "minhash_similar_function",
                function=self.similar_function,
                num_perm=sql.Literal(float(self.num_perm)),
                **common,
            )
        )
        conn.execute(
            statement(
                "minhash_similar_key_function",
                function=self.similar_key_function,
                similar=self.similar_function,
                **common,
            )
        )

    def stored_signatures(self, values: NDArray[np.uint64]) -> NDArray[np.int64]:
        """Signature values as stored ``bigint`` values (:mod:`simindex.bits`)."""
        return to_signed_array(np.ascontiguousarray(values, dtype=np.uint64))

    def copy(
        self,
        conn: PgConnection,
        keys: Sequence[object],
        values: NDArray[np.uint64],
        staging: bool = False,
    ) -> None:
        """Write the signatures and band rows of documents (all with features)."""
        stored = self.stored_signatures(values).tolist()
        band_hashes = self.design.band_hashes(values).tolist()
        cursor = conn.cursor()
        query = statement("minhash_copy_signatures", table=self.signatures(staging))
        with cursor.copy(query) as copy:
            for key, signature in zip(keys, stored, strict=True):
                copy.write_row((key, signature))
        with cursor.copy(statement("minhash_copy_bands", table=self.bands(staging))) as copy:
            for row in _band_rows(keys, band_hashes):
                copy.write_row(row)

    def finish(self, conn: PgConnection, staging: bool = False) -> None:
        conn.execute(
            statement(
                "minhash_create_band_index",
                index=sql.Identifier(self._name("bands", staging) + "_band_hash"),
                table=self.bands(staging),
            )
        )
        conn.execute(
            statement(
                "minhash_create_band_key_index",
                index=sql.Identifier(self._name("bands", staging) + "_key"),
                table=self.bands(staging),
            )
        )
        for table in (self.signatures(staging), self.bands(staging)):
            conn.execute(statement("analyze", table=table))

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
        for function in (self.similar_key_function, self.similar_function):
            conn.execute(statement("drop_function", function=function))
        for staging in (True, False):
            conn.execute(statement("drop_table", table=self.signatures(staging)))
            conn.execute(statement("drop_table", table=self.bands(staging)))


def _band_rows(
    keys: Sequence[object], band_hashes: list[list[int]]
) -> Iterator[tuple[int, int, object]]:
    for key, hashes in zip(keys, band_hashes, strict=True):
        for band, value in enumerate(hashes):
            yield band, value, key
