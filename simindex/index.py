"""The ``Index`` facade: create, build, query and drop one near-duplicate index.

Every method takes the caller's ``bind`` (Engine, Connection or DSN, see
:mod:`simindex.db.connection`): with a Connection it works inside the caller's transaction and
leaves committing to them; otherwise it commits its own. The work itself is done by the
operations in :mod:`simindex.ops`, which take a connection, the catalog entry and the store.

Queries are the hot path: an Index keeps its catalog entry and checks it with one short
prepared statement (the catalog row's id and xmin) before each query, and with an Engine or a
DSN a query runs in autocommit, without BEGIN and COMMIT round trips.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg

from simindex._advice import not_indexed, warn_below_threshold
from simindex._arguments import SimilarArguments, function_arguments
from simindex._session import by_key_statement, session
from simindex._session import reading as _reading
from simindex.core.spec import Method, SimHash, resolve
from simindex.db.catalog import (
    DEFAULT_SCHEMA,
    IndexInfo,
    Store,
    catalog,
    check_name,
    check_schema,
    find_index,
    index_names,
    read_index,
    ready_index,
)
from simindex.db.connection import Bind, PgConnection
from simindex.db.minhash_store import MinHashStore
from simindex.db.objects import create_statements, drop_statements
from simindex.db.simhash_store import SimHashStore
from simindex.db.source import check_key, check_owner, describe, row_count, row_estimate
from simindex.db.statements import run, statement
from simindex.db.triggers import event_triggers_on
from simindex.errors import (
    IndexExistsError,
    IndexNotFoundError,
    KeyNotIndexedError,
)
from simindex.ops import build as build_op
from simindex.ops import clusters as clusters_op
from simindex.ops import near as near_op
from simindex.ops import pairs as pairs_op
from simindex.ops import similar as similar_op
from simindex.ops import stats as stats_op
from simindex.ops.build import BuildReport, Progress
from simindex.ops.clusters import (
    ClusterMember,
    ClusterMethod,
    ClusterProgress,
    ClusterReport,
    Survivor,
)
from simindex.ops.near import Match
from simindex.ops.pairs import PairsProgress
from simindex.ops.similar import Similar
from simindex.ops.stats import IndexStats
from simindex.ops.verify import Verify

__all__ = [
    "Bind",
    "Index",
    "IndexInfo",
    "IndexStats",
    "Match",
    "Similar",
    "SimilarArguments",
    "create_index",
    "drop_index",
    "get_index",
    "list_indexes",
]


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
        table: the source table; ``schema`` qualifies it (default: the search_path).
        column: the source table's text column.
        key: a unique column identifying rows (default: the single-column primary key).
        method: ``SimHash(...)`` (default) or ``MinHash(...)``.
        index_schema: the schema simindex was migrated into.
    """
    check_name(name)
    chosen = method if method is not None else SimHash()
    # Bad arguments fail before any database work; the tokenizer's version is recorded.
    chosen = resolve(chosen).check_tokenizer().method
    with session(bind, index_schema) as conn:
        source = describe(conn, table, column, schema=schema, key=key)
        check_owner(conn, source)
        # The planner's count when the table was analyzed, else a real one.
        rows = row_estimate(conn, source)
        spec = resolve(chosen, row_count(conn, source) if rows is None else rows)
        if find_index(conn, index_schema, name) is not None:
            raise IndexExistsError(f"an index named {name!r} exists already")
        trusted = event_triggers_on(conn, index_schema)
        run(conn, create_statements(index_schema, name, source, spec, trusted=trusted))
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
    with session(bind, index_schema) as conn:
        row = find_index(conn, index_schema, name)
        if row is None:
            if missing_ok:
                return
            raise IndexNotFoundError(f"no index named {name!r}")
        run(conn, drop_statements(index_schema, name, row.source, row.spec))


def list_indexes(bind: Bind, *, index_schema: str = DEFAULT_SCHEMA) -> list[str]:
    """Names of all indexes."""
    with session(bind, index_schema) as conn:
        return index_names(conn, index_schema)


class Index:
    """One near-duplicate index. Cheap to make; it reads its catalog entry on first use and
    keeps it while the catalog row is unchanged (checked before every query)."""

    def __init__(self, bind: Bind, name: str, *, index_schema: str = DEFAULT_SCHEMA) -> None:
        self.bind = bind
        self.name = check_name(name)
        self.index_schema = check_schema(index_schema)
        self._entry: tuple[tuple[Any, ...], IndexInfo, Store] | None = None
        self._by_key_sql: dict[tuple[tuple[Any, ...], str], bytes] = {}

    def __repr__(self) -> str:
        return f"Index({self.name!r}, index_schema={self.index_schema!r})"

    def info(self) -> IndexInfo:
        """The catalog row: source, spec, state and counts."""
        with session(self.bind, self.index_schema) as conn:
            return read_index(conn, self.index_schema, self.name)

    def stats(self) -> IndexStats:
        """The index now: keys it holds, queued keys and the age of the oldest (its lag behind
        the table), failed items, whether the sync worker found it broken and its last error,
        and the disk use of its tables."""
        with session(self.bind, self.index_schema) as conn:
            return stats_op.one_index(conn, read_index(conn, self.index_schema, self.name))

    def _ready(self, conn: PgConnection) -> tuple[IndexInfo, Store]:
        """The catalog entry and store, from the last call's while the catalog row is the
        same (a prepared statement: one short round trip); an index not built raises."""
        token = conn.execute(
            statement("catalog_token", catalog=catalog(self.index_schema)),
            {"name": self.name},
            prepare=True,
        ).fetchone()
        return self._entry_for(conn, token)

    def _entry_for(self, conn: PgConnection, token: Any) -> tuple[IndexInfo, Store]:
        if token is None:
            self._entry = None
            raise IndexNotFoundError(f"no index named {self.name!r}")
        if self._entry is None or self._entry[0] != tuple(token[:2]):
            info, store = ready_index(conn, self.index_schema, self.name)
            self._entry = (tuple(token[:2]), info, store)
        return self._entry[1], self._entry[2]

    def _ready_for_key(self, conn: PgConnection, key: Any) -> tuple[IndexInfo, Store, bool | None]:
        """:meth:`_ready`, and whether ``key`` is in the index (None: not asked), in the same
        round trip when the entry is known and the connection is in autocommit (a dropped
        index's missing table then fails one statement, not the caller's transaction)."""
        entry = self._entry
        if entry is None or not conn.autocommit:
            return *self._ready(conn), None
        store = entry[2]
        table = store.table() if isinstance(store, SimHashStore) else store.signatures()
        try:
            row = conn.execute(
                statement("catalog_token_and_key", catalog=catalog(self.index_schema), table=table),
                {"name": self.name, "key": key},
                prepare=True,
            ).fetchone()
        except psycopg.Error:  # the index was dropped meanwhile, or the key is of a wrong type
            return *self._ready(conn), None
        info, current = self._entry_for(conn, row)
        if row is None or current is not store:  # (None raised already) a new entry
            return info, current, None
        return info, current, bool(row[2])

    def _by_key(
        self,
        conn: PgConnection,
        key: Any,
        measure: str,
        limit: int | float | None,
        max_rows: int | None = None,
    ) -> list[tuple[Any, Any]] | None:
        """A query by key in one round trip with the check of the kept entry (autocommit
        only); None when that cannot answer (no entry yet, the catalog row changed, an error),
        and the caller goes the long way, which says what is wrong."""
        entry = self._entry
        if entry is None or not conn.autocommit:
            return None
        token, info, store = entry
        if isinstance(store, SimHashStore) != (measure == "distance"):
            return None
        if isinstance(store, SimHashStore):
            params: dict[str, Any] = {
                "max_distance": near_op.check_distance(store, limit)  # type: ignore[arg-type]
            }
        else:
            params = {"threshold": similar_op.check_threshold(info.spec, limit)}
        text = self._by_key_sql.get((token, measure))
        if text is None:  # composed once per kept entry
            text = by_key_statement(self.index_schema, store).as_bytes(conn)
            self._by_key_sql = {(token, measure): text}
        try:
            rows = conn.execute(
                text,
                {"name": self.name, "key": key, "limit": max_rows, **params},
                prepare=True,
            ).fetchall()
        except psycopg.Error:  # the index was dropped meanwhile, or the key is of a wrong type
            return None
        if not rows or tuple(rows[0][:2]) != token:
            return None
        if not rows[0][2]:
            raise not_indexed(conn, info, key)
        warn_below_threshold(info, None if measure == "distance" else limit)
        return [(row[3], row[4]) for row in rows if row[3] is not None]

    def fingerprint(self, text: str | None) -> int | SimilarArguments | None:
        """What this index's SQL functions take for ``text``, computed as the index computes
        it: for SimHash the fingerprint as a signed ``bigint`` (``to_signed`` of the unsigned
        64-bit SimHash, see :mod:`simindex.bits`), for ``<name>_near_v1(fingerprint => ...)``;
        for MinHash the two arrays ``<name>_similar_v1(signature, band_keys)`` takes.
        None for a text with no features (NULL, empty, punctuation only)."""
        with session(self.bind, self.index_schema) as conn:
            return function_arguments(read_index(conn, self.index_schema, self.name), text)

    def _simhash(self, conn: PgConnection, other: str) -> tuple[IndexInfo, SimHashStore]:
        info, store = self._ready(conn)
        return info, self._simhash_store(store, other)

    def _simhash_store(self, store: Store, other: str) -> SimHashStore:
        if not isinstance(store, SimHashStore):
            raise TypeError(f"index {self.name!r} is a MinHash index: use {other}")
        return store

    def build(
        self,
        *,
        batch_size: int = 2000,
        workers: int | None = None,
        progress: Progress | None = None,
    ) -> BuildReport:
        """Fill the index from the source table (again, safely, when it was built before).

        Parameters:
            batch_size: rows per fetch and fingerprint task.
            workers: processes computing fingerprints (default: all cores for large tables).
            progress: called after each batch with (rows read, the source's row count).

        A SimHash design sized to the table is chosen again for the counted rows, and a
        MinHash index of storage format 1 moves to format 2; the new side tables, functions
        and delete triggers replace the old ones in one transaction.
        """
        return build_op.build(
            self.bind,
            self.index_schema,
            self.name,
            batch_size=batch_size,
            workers=workers,
            progress=progress,
        )

    def near(
        self,
        text: str | None = None,
        *,
        fingerprint: int | None = None,
        max_distance: int | None = None,
        limit: int | None = None,
    ) -> list[Match]:
        """Rows whose SimHash is within ``max_distance`` bits of a text's (or a fingerprint).

        ``fingerprint`` is the signed ``bigint`` that :meth:`fingerprint` gives and the SQL
        functions take (an unsigned value is refused: ``simindex.bits.to_signed`` converts).
        ``max_distance`` defaults to, and may not exceed, the index's. Sorted by distance, then
        key; ``limit`` keeps the first rows only (a text inside a cluster of thousands of
        copies). A text with no features (None, empty) has no neighbours: ``[]``.
        """
        with _reading(self.bind, self.index_schema) as conn:
            info, store = self._simhash(conn, "similar()")
            return near_op.near(
                conn,
                info,
                store,
                text=text,
                fingerprint=fingerprint,
                max_distance=max_distance,
                limit=limit,
            )

    def near_key(
        self, key: Any, *, max_distance: int | None = None, limit: int | None = None
    ) -> list[Match]:
        """Rows within ``max_distance`` bits of the row with ``key`` (itself excluded), the
        nearest ``limit`` of them when given."""
        check_key(key)
        near_op.check_limit(limit)
        with _reading(self.bind, self.index_schema) as conn:
            fast = self._by_key(conn, key, "distance", max_distance, limit)
            if fast is not None:
                return [Match(found_key, distance) for found_key, distance in fast]
            info, found, indexed = self._ready_for_key(conn, key)
            store = self._simhash_store(found, "similar(key=...)")
            try:
                return near_op.near_key(
                    conn, info, store, key, max_distance, limit, indexed=indexed
                )
            except KeyNotIndexedError:
                raise not_indexed(conn, info, key) from None

    def similar(
        self,
        text: str | None = None,
        *,
        key: Any = None,
        threshold: float | None = None,
        verify: Verify | None = None,
        exact: bool = False,
        limit: int | None = None,
    ) -> list[Similar]:
        """Rows whose Jaccard similarity to a text (or to the row with ``key``) reaches
        ``threshold`` (default: the index's), most similar first.

        Candidates come from the LSH bands. ``verify="exact"`` (the default) keeps those whose
        shingle sets, recomputed from the source texts, really reach the threshold, and
        reports that exact similarity; ``verify="estimate"`` keeps those whose signatures
        estimate it does, without reading any text (faster, but off by ±0.035 at J = 0.8
        with 128 values). ``exact=True`` is ``verify="exact"``. ``limit`` keeps the most
        similar rows only.
        """
        mode = similar_op.verify_mode(verify, exact)
        near_op.check_limit(limit)
        with _reading(self.bind, self.index_schema) as conn:
            fast = None
            if mode == "estimate" and key is not None and text is None:
                fast = self._by_key(conn, key, "similarity", threshold, limit)
            if fast is not None:
                return [Similar(found_key, float(value)) for found_key, value in fast]
            if key is None:
                info, store = self._ready(conn)
                indexed = None
            else:
                info, store, indexed = self._ready_for_key(conn, key)
            if not isinstance(store, MinHashStore):
                raise TypeError(f"index {self.name!r} is a SimHash index: use near()")
            warn_below_threshold(info, threshold)
            try:
                return similar_op.similar(
                    conn,
                    info,
                    store,
                    text=text,
                    key=key,
                    threshold=threshold,
                    verify=mode,
                    indexed=indexed,
                    limit=limit,
                )
            except KeyNotIndexedError:
                raise not_indexed(conn, info, key) from None

    def pairs(
        self,
        *,
        max_distance: int | None = None,
        threshold: float | None = None,
        verify: Verify | None = None,
        progress: PairsProgress | None = None,
        groups: bool = False,
    ) -> Iterator[Any]:
        """Every pair of rows within ``max_distance`` bits (SimHash) or at or above
        ``threshold`` Jaccard similarity (MinHash, verified as ``verify`` says, see
        :meth:`similar`), each pair once, ``left < right``.

        Found by self-joins in SQL and streamed as PostgreSQL sends them, in one
        transaction held open while you iterate. Identical rows are collapsed to one before
        the joins; exact verification of MinHash pairs then compares classes of equal shingle
        sets, not rows. ``groups=True`` yields each set of identical rows once as an
        :class:`IdenticalGroup` (instead of its m(m-1)/2 pairs), first, and then the pairs
        between groups and single rows, a group named by its first (smallest) key; it
        verifies by the estimate (identical signatures) unless ``verify="exact"`` (identical
        shingle sets; integer or uuid keys).
        ``progress`` is called after each part (Manku table or band) with (parts done, parts
        in all); with exact verification, once all candidate pairs are found. Yields
        :class:`NearPair`, :class:`SimilarPair` or :class:`IdenticalGroup`.
        """
        with session(self.bind, self.index_schema) as conn:
            info, store = self._ready(conn)
            warn_below_threshold(info, threshold)
            yield from pairs_op.pairs(
                conn,
                info,
                store,
                max_distance=max_distance,
                threshold=threshold,
                verify=verify,
                progress=progress,
                groups=groups,
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
        nearest earlier row's cluster (by the estimate, as sync keeps it up).
        ``method="bottom_k"``: rows whose ``bottom_k`` smallest feature hashes are the same (no
        comparisons; seed 000).
        """
        with session(self.bind, self.index_schema) as conn:
            info, store = self._ready(conn)
            warn_below_threshold(info, threshold)
            return clusters_op.clusters(
                conn,
                info,
                store,
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
        with session(self.bind, self.index_schema) as conn:
            yield from clusters_op.members(
                conn, read_index(conn, self.index_schema, self.name), min_size=min_size
            )

    def survivors(
        self, method: ClusterMethod, *, prefer: str = "smallest_key"
    ) -> Iterator[Survivor]:
        """Every row of a cluster with more than one row, flagged ``survivor`` for the one to
        keep. ``method``: the clustering meant (``pairs``, ``leader``, ``bottom_k``); another
        than the last :meth:`clusters` run's is refused (ValueError). ``prefer``:
        ``smallest_key``, ``largest_key``, ``longest_text``, ``shortest_text``,
        ``newest:<column>`` or ``oldest:<column>``; ties go to the smallest key. In SQL:
        ``<name>_survivors_v1(clustering, prefer)``."""
        with session(self.bind, self.index_schema) as conn:
            yield from clusters_op.survivors(
                conn, read_index(conn, self.index_schema, self.name), method=method, prefer=prefer
            )

    def drop(self) -> None:
        """Remove this index (see :func:`drop_index`)."""
        drop_index(self.bind, self.name, index_schema=self.index_schema)
