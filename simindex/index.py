"""The ``Index`` facade: create, build, query and drop one near-duplicate index (layer 6).

Every method takes the caller's ``bind`` (Engine, Connection or DSN, see
:mod:`simindex.connection`): with a Connection it works inside the caller's transaction and
leaves committing to them; otherwise it commits its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql
from sqlalchemy.engine import Connection, Engine

from simindex.bits import MAX_UNSIGNED, to_signed
from simindex.catalog import DEFAULT_SCHEMA, check_schema
from simindex.cluster_store import ClusterStore
from simindex.connection import connect
from simindex.errors import (
    IndexExistsError,
    IndexNotFoundError,
    IndexNotReadyError,
    KeyNotIndexedError,
)
from simindex.minhash_store import MinHashStore
from simindex.simhash_store import SimHashStore
from simindex.source import Source, describe
from simindex.spec import SPEC_VERSION, IndexSpec, Method, SimHash, resolve
from simindex.sql import PgConnection, run, statement
from simindex.triggers import Triggers

if TYPE_CHECKING:
    from simindex.build import BuildReport, Progress
    from simindex.clusters import (
        ClusterMember,
        ClusterMethod,
        ClusterProgress,
        ClusterReport,
        Survivor,
    )
    from simindex.pairs import NearPair, PairsProgress, SimilarPair
    from simindex.verify import Verify

Bind = Engine | Connection | str
NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")


@dataclass(frozen=True, slots=True)
class Match:
    """A SimHash neighbour: its key (in the source key's type) and Hamming distance."""

    key: Any
    distance: int


@dataclass(frozen=True, slots=True)
class Similar:
    """A MinHash neighbour: its key and (estimated, or exact on request) Jaccard similarity."""

    key: Any
    similarity: float


@dataclass(frozen=True, slots=True)
class IndexInfo:
    """What the catalog says about an index."""

    name: str
    source: Source
    spec: IndexSpec
    state: str
    row_count: int
    skipped_count: int
    created_at: datetime
    updated_at: datetime
    built_at: datetime | None


@contextmanager
def transaction(bind: Bind) -> Iterator[PgConnection]:
    """The psycopg connection under ``bind``, in a transaction committed here unless the caller
    handed in a Connection (then it is theirs to commit)."""
    with connect(bind) as connection:
        if not connection.in_transaction():
            connection.begin()
        raw = connection.connection.driver_connection
        if not isinstance(raw, psycopg.Connection):
            raise TypeError("simindex needs the psycopg (version 3) driver")
        yield raw
        if not isinstance(bind, Connection):
            connection.commit()


def check_name(name: str) -> str:
    """Index names become part of table and function names: keep them plain."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ValueError(
            "an index name is 1 to 40 characters: a lowercase letter, then lowercase letters, "
            f"digits or underscores; got {name!r}"
        )
    return name


def catalog(schema: str) -> sql.Identifier:
    return sql.Identifier(check_schema(schema), "indexes")


def store_for(
    schema: str, name: str, source: Source, spec: IndexSpec
) -> SimHashStore | MinHashStore:
    if isinstance(spec.method, SimHash):
        return SimHashStore(schema, name, source.key_type, spec.design)  # type: ignore[arg-type]
    return MinHashStore(
        schema,
        name,
        source.key_type,
        spec.design,  # type: ignore[arg-type]
        spec.method.num_perm,
        spec.method.threshold,
    )


def create_index(
    bind: Bind,
    name: str,
    table: str,
    column: str,
    *,
    key: str | None = None,
    schema: str | None = None,
    method: Method | None = None,
    index_schema: str = DEFAULT_SCHEMA,
) -> Index:
    """Create a near-duplicate index of ``table.column`` (empty: call :meth:`Index.build`).

    Parameters:
        name: the index's name (lowercase letters, digits, underscores).
        table, column: the source table and its text column; ``schema`` qualifies the table
            (default: the search_path).
        key: a unique column identifying rows (default: the single-column primary key).
        method: ``SimHash(...)`` (default) or ``MinHash(...)``.
        index_schema: the schema simindex was migrated into.
    """
    check_name(name)
    spec = resolve(method if method is not None else SimHash())
    spec.check_tokenizer()
    with transaction(bind) as conn:
        source = describe(conn, table, column, schema=schema, key=key)
        if _get_row(conn, index_schema, name) is not None:
            raise IndexExistsError(f"an index named {name!r} exists already")
        run(conn, create_statements(index_schema, name, source, spec))
    return Index(bind, name, index_schema=index_schema)


def get_index(bind: Bind, name: str, *, index_schema: str = DEFAULT_SCHEMA) -> Index:
    """An existing index by name; :class:`IndexNotFoundError` if there is none."""
    index = Index(bind, name, index_schema=index_schema)
    index.info()
    return index


def drop_index(
    bind: Bind, name: str, *, index_schema: str = DEFAULT_SCHEMA, missing_ok: bool = False
) -> None:
    """Remove an index: its side tables, functions and catalog row (the source is untouched)."""
    with transaction(bind) as conn:
        row = _get_row(conn, index_schema, name)
        if row is None:
            if missing_ok:
                return
            raise IndexNotFoundError(f"no index named {name!r}")
        run(conn, drop_statements(index_schema, name, row.source, row.spec))


def create_statements(
    index_schema: str, name: str, source: Source, spec: IndexSpec
) -> list[sql.Composed]:
    """What creating an index runs, in order, as statements without values: the catalog row,
    the empty side tables with their indexes, the query functions, the queue and triggers.

    :func:`create_index` executes them; :mod:`simindex.alembic` renders them as text.
    """
    check_name(name)
    if source.schema:
        source_schema: sql.Composable = sql.Literal(source.schema)
    else:
        # Not resolved yet (an offline migration): the schema the search_path finds the table
        # in when the statement runs; the regclass cast fails, naming the table, if there is none.
        source_schema = statement(
            "source_schema_of", table=sql.Literal(source.identifier.as_string())
        )
    insert = statement(
        "catalog_insert",
        catalog=catalog(index_schema),
        name=sql.Literal(name),
        source_schema=source_schema,
        source_table=sql.Literal(source.table),
        key_column=sql.Literal(source.key_column),
        key_type=sql.Literal(source.key_type),
        text_column=sql.Literal(source.text_column),
        method=sql.Literal(spec.kind),
        spec=sql.Literal(spec.to_json()),
        spec_version=sql.Literal(SPEC_VERSION),
    )
    store = store_for(index_schema, name, source, spec)
    return [
        insert,
        *store.create_statements(),
        *store.finish_statements(),
        *store.function_statements(),
        *Triggers(index_schema, name, source, store).install_statements(),
    ]


def drop_statements(
    index_schema: str, name: str, source: Source, spec: IndexSpec
) -> list[sql.Composed]:
    """What dropping an index runs, in order (see :func:`create_statements`)."""
    literal_name = sql.Literal(check_name(name))
    store = store_for(index_schema, name, source, spec)
    return [
        # Waits for a sync batch in flight; later batches skip the index.
        statement("catalog_lock", catalog=catalog(index_schema), name=literal_name),
        *Triggers(index_schema, name, source, store).remove_statements(),
        *store.drop_statements(),
        *ClusterStore(index_schema, name).drop_statements(),
        statement("catalog_delete", catalog=catalog(index_schema), name=literal_name),
    ]


def list_indexes(bind: Bind, *, index_schema: str = DEFAULT_SCHEMA) -> list[str]:
    """Names of all indexes."""
    with transaction(bind) as conn:
        rows = conn.execute(statement("catalog_list", catalog=catalog(index_schema))).fetchall()
    return [str(name) for (name,) in rows]


def _get_row(conn: PgConnection, schema: str, name: str) -> IndexInfo | None:
    row = conn.execute(statement("catalog_get", catalog=catalog(schema)), {"name": name}).fetchone()
    if row is None:
        return None
    source = Source(0, *row[1:6])
    return IndexInfo(row[0], source, IndexSpec.from_json(row[6]), *row[7:])


def key_not_indexed(name: str, key: Any) -> KeyNotIndexedError:
    return KeyNotIndexedError(
        f"key {key!r} is not in index {name!r} (no such row, or its text is NULL or empty)"
    )


class Index:
    """One near-duplicate index. Cheap to make: it reads the catalog when a method runs."""

    def __init__(self, bind: Bind, name: str, *, index_schema: str = DEFAULT_SCHEMA) -> None:
        self.bind = bind
        self.name = check_name(name)
        self.index_schema = check_schema(index_schema)

    def __repr__(self) -> str:
        return f"Index({self.name!r}, index_schema={self.index_schema!r})"

    def _info(self, conn: PgConnection) -> IndexInfo:
        info = _get_row(conn, self.index_schema, self.name)
        if info is None:
            raise IndexNotFoundError(f"no index named {self.name!r}")
        return info

    def info(self) -> IndexInfo:
        """The catalog row: source, spec, state and counts."""
        with transaction(self.bind) as conn:
            return self._info(conn)

    def _ready(self, conn: PgConnection) -> tuple[IndexInfo, SimHashStore | MinHashStore]:
        info = self._info(conn)
        if info.state != "ready":
            raise IndexNotReadyError(
                f"index {self.name!r} is {info.state}: run build() (or `simindex build "
                f"{self.name}`) first"
            )
        return info, store_for(self.index_schema, self.name, info.source, info.spec)

    def build(
        self,
        *,
        batch_size: int = 2000,
        workers: int | None = None,
        progress: Progress | None = None,
    ) -> BuildReport:
        """Fill the index from the source table (again, safely, when it was built before).

        Parameters:
            batch_size: rows per fetch, fingerprint task and COPY.
            workers: processes computing fingerprints (default: all cores for large tables).
            progress: called after each batch with (rows read, the planner's row estimate).
        """
        from simindex.build import build

        return build(self, batch_size=batch_size, workers=workers, progress=progress)

    def near(
        self,
        text: str | None = None,
        *,
        fingerprint: int | None = None,
        max_distance: int | None = None,
    ) -> list[Match]:
        """Rows whose SimHash is within ``max_distance`` bits of a text's (or a fingerprint).

        ``max_distance`` defaults to, and may not exceed, the index's. Sorted by distance, then
        key. A text with no features (NULL, empty) has no neighbours: ``[]``.
        """
        with transaction(self.bind) as conn:
            info, store = self._ready(conn)
            if not isinstance(store, SimHashStore):
                raise TypeError(f"index {self.name!r} is a MinHash index: use similar()")
            if (text is None) == (fingerprint is None):
                raise TypeError("give exactly one of text= or fingerprint=")
            if fingerprint is None:
                values, present = info.spec.simhash_values([text])
                if not present[0]:
                    return []
                fingerprint = int(values[0])
            if isinstance(fingerprint, bool) or not isinstance(fingerprint, int):
                raise TypeError(f"fingerprint must be an int, got {type(fingerprint).__name__}")
            if not 0 <= fingerprint <= MAX_UNSIGNED:
                raise ValueError(f"fingerprint must be an unsigned 64-bit int, got {fingerprint}")
            rows = conn.execute(
                statement("simhash_near", function=store.near_function),
                {
                    "fingerprint": to_signed(fingerprint),
                    "max_distance": self._distance(store, max_distance),
                },
            ).fetchall()
        return [Match(key, distance) for key, distance in rows]

    def near_key(self, key: Any, *, max_distance: int | None = None) -> list[Match]:
        """Rows within ``max_distance`` bits of the row with ``key`` (itself excluded)."""
        with transaction(self.bind) as conn:
            _, store = self._ready(conn)
            if not isinstance(store, SimHashStore):
                raise TypeError(f"index {self.name!r} is a MinHash index: use similar(key=...)")
            rows = conn.execute(
                statement("simhash_near_key", function=store.near_key_function),
                {"key": key, "max_distance": self._distance(store, max_distance)},
            ).fetchall()
            # An empty answer is common; only then is it worth asking whether the key exists.
            if (
                not rows
                and not conn.execute(
                    statement("simhash_fingerprint_of_key", table=store.table()), {"key": key}
                ).fetchone()
            ):
                raise key_not_indexed(self.name, key)
        return [Match(found_key, found_distance) for found_key, found_distance in rows]

    @staticmethod
    def _distance(store: SimHashStore, max_distance: int | None) -> int:
        limit = store.design.max_distance
        if max_distance is None:
            return limit
        if isinstance(max_distance, bool) or not isinstance(max_distance, int):
            raise TypeError(f"max_distance must be an int, got {type(max_distance).__name__}")
        if not 0 <= max_distance <= limit:
            raise ValueError(
                f"max_distance must be from 0 to the index's {limit}, got {max_distance}"
            )
        return max_distance

    def similar(
        self,
        text: str | None = None,
        *,
        key: Any = None,
        threshold: float | None = None,
        verify: Verify | None = None,
        exact: bool = False,
    ) -> list[Similar]:
        """Rows whose Jaccard similarity to a text (or to the row with ``key``) reaches
        ``threshold`` (default: the index's), most similar first.

        Candidates come from the LSH bands. ``verify="exact"`` (the default) keeps those whose
        shingle sets, recomputed from the source texts, really reach the threshold, and
        reports that exact similarity; ``verify="estimate"`` keeps those whose signatures
        estimate it does, without reading any text (faster, but off by ±0.035 at J = 0.8
        with 128 values). ``exact=True`` is ``verify="exact"``.
        """
        from simindex.similar import similar, verify_mode

        mode = verify_mode(verify, exact)
        return similar(self, text=text, key=key, threshold=threshold, verify=mode)

    def pairs(
        self,
        *,
        max_distance: int | None = None,
        threshold: float | None = None,
        verify: Verify | None = None,
        progress: PairsProgress | None = None,
    ) -> Iterator[NearPair | SimilarPair]:
        """Every pair of rows within ``max_distance`` bits (SimHash) or at or above
        ``threshold`` Jaccard similarity (MinHash, verified as :meth:`similar` says), each
        pair once, ``left < right``.

        Found by self-joins in SQL and streamed as PostgreSQL sends them, in one
        transaction held open while you iterate. ``progress`` is called after each Manku table
        or band with (parts done, parts in all); with exact verification, once all candidate
        pairs are found.
        """
        from simindex.pairs import pairs

        return pairs(
            self,
            max_distance=max_distance,
            threshold=threshold,
            verify=verify,
            progress=progress,
        )

    def clusters(
        self,
        *,
        method: ClusterMethod = "pairs",
        max_distance: int | None = None,
        threshold: float | None = None,
        verify: Verify | None = None,
        bottom_k: int = 4,
        progress: ClusterProgress | None = None,
    ) -> ClusterReport:
        """Group the rows into clusters and write them to ``<index_schema>.<name>_clusters``
        ``(key, cluster_id)``, replacing the last run's.

        A cluster's id is its smallest key; a row with no near-duplicate is its own cluster.
        ``method="pairs"`` (default): connected components of :meth:`pairs` at
        ``max_distance``/``threshold`` (MinHash pairs verified as ``verify`` says, see
        :meth:`similar`), computed inside PostgreSQL. ``method="leader"``: each row joins its
        nearest earlier row's cluster (by the estimate, as sync keeps it).
        ``method="bottom_k"``: rows whose ``bottom_k`` smallest feature hashes are the same (no
        comparisons; seed 000).
        """
        from simindex.clusters import clusters

        return clusters(
            self,
            method=method,
            max_distance=max_distance,
            threshold=threshold,
            verify=verify,
            bottom_k=bottom_k,
            progress=progress,
        )

    def cluster_members(self, *, min_size: int = 2) -> Iterator[ClusterMember]:
        """The rows of clusters with at least ``min_size`` rows, biggest clusters first, as
        written by the last :meth:`clusters` (streamed)."""
        from simindex.clusters import members

        return members(self, min_size=min_size)

    def survivors(self, *, prefer: str = "smallest_key") -> Iterator[Survivor]:
        """Every row of a cluster with more than one row, flagged ``survivor`` for the one to
        keep (the others are the duplicates to delete or export).

        ``prefer``: ``smallest_key``, ``largest_key``, ``longest_text``, ``shortest_text``,
        ``newest:<column>`` or ``oldest:<column>`` (a column of the source table, e.g. a
        timestamp); ties go to the smallest key. In SQL: ``<name>_survivors_v1(prefer)``.
        """
        from simindex.clusters import survivors

        return survivors(self, prefer=prefer)

    def drop(self) -> None:
        """Remove this index (see :func:`drop_index`)."""
        drop_index(self.bind, self.name, index_schema=self.index_schema)
