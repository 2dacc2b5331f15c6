"""The objects holding an index's clusters: the ``<name>_clusters`` table, the
``<name>_survivors_v1`` function (both made by the first :meth:`simindex.index.Index.clusters`)
and, for leader clustering, the ``<name>_cluster_rows_v1`` function sync calls."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from psycopg import sql

from simindex.db.answers import max_rows, protect_statements
from simindex.db.connection import PgConnection
from simindex.db.minhash_store import MinHashStore
from simindex.db.pg_array import key_array
from simindex.db.privileges import carry_grants
from simindex.db.simhash_store import SimHashStore
from simindex.db.source import Source
from simindex.db.statements import run, statement


@dataclass(frozen=True, slots=True)
class ClusterStore:
    """Names and statements of one index's cluster objects in ``schema``."""

    schema: str
    name: str

    @property
    def table_name(self) -> str:
        return f"{self.name}_clusters"

    @property
    def table(self) -> sql.Identifier:
        return sql.Identifier(self.schema, self.table_name)

    @property
    def survivors_function(self) -> sql.Identifier:
        return sql.Identifier(self.schema, f"{self.name}_survivors_v1")

    @property
    def assign_function(self) -> sql.Identifier:
        """Leader clustering of written rows, called by sync while the index's clustering is
        ``leader``."""
        return sql.Identifier(self.schema, f"{self.name}_cluster_rows_v1")

    def create_assign_function(
        self, conn: PgConnection, source: Source, store: SimHashStore | MinHashStore
    ) -> None:
        if isinstance(store, SimHashStore):
            neighbours, nearest_first = store.near_key_function, sql.SQL("n.distance")
        else:
            neighbours, nearest_first = store.similar_key_function, sql.SQL("n.similarity DESC")
        query = statement(
            "clusters_assign_function",
            function=self.assign_function,
            key_type=sql.SQL(source.key_type),
            table=self.table,
            neighbours=neighbours,
            nearest_first=nearest_first,
        )
        conn.execute(query)

    def assign(self, conn: PgConnection, key_type: str, keys: Sequence[object]) -> None:
        """Put written rows into clusters (leader clustering)."""
        if keys:
            conn.execute(
                statement(
                    "clusters_assign", function=self.assign_function, key_type=sql.SQL(key_type)
                ),
                {"keys": key_array(conn, keys)},
            )

    def forget(self, conn: PgConnection, key_type: str, keys: Sequence[object]) -> None:
        """Remove rows that left the index."""
        if keys:
            conn.execute(
                statement("clusters_forget", table=self.table, key_type=sql.SQL(key_type)),
                {"keys": key_array(conn, keys)},
            )

    def create(self, conn: PgConnection, source: Source) -> None:
        """The table and the survivors function, if they are not there yet."""
        # format_type output from the catalog: a type name PostgreSQL itself quoted.
        key_type = sql.SQL(source.key_type)
        conn.execute(statement("clusters_create_table", table=self.table, key_type=key_type))
        conn.execute(
            statement(
                "clusters_create_cluster_index",
                index=sql.Identifier(f"{self.table_name}_cluster_id"),
                table=self.table,
            )
        )
        # A cluster is named by its smallest key: a row is seen when its key and that one are.
        run(
            conn, protect_statements(self.schema, self.name, self.table_name, ("key", "cluster_id"))
        )
        # Rights given per index (kept on its queue) reach this table too.
        carry_grants(conn, sql.Identifier(self.schema, f"{self.name}_queue"), [self.table])
        conn.execute(
            statement(
                "clusters_survivors_function",
                function=self.survivors_function,
                max_rows=max_rows(),
                key_type=key_type,
                index_name=sql.Literal(self.name),
                catalog=sql.Identifier(self.schema, "indexes"),
                usable=sql.Identifier(self.schema, "source_usable_v1"),
                drift=sql.Identifier(self.schema, "drift_v1"),
                # A name for format's %s, quoted here once.
                clusters_table=sql.Literal(self.table.as_string()),
            )
        )

    def drop(self, conn: PgConnection) -> None:
        run(conn, self.drop_statements())

    def drop_statements(self) -> list[sql.Composed]:
        return [
            statement("drop_function", function=self.assign_function),
            statement("drop_function", function=self.survivors_function),
            statement("drop_table", table=self.table),
        ]
