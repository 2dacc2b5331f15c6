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

import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Literal, overload

from simindex._session import reading, session
from simindex.core.bits import to_signed
from simindex.core.spec import Method, SimHash
from simindex.db.catalog import (
    DEFAULT_SCHEMA,
    IndexInfo,
    Store,
    check_name,
    check_schema,
    index_names,
    read_index,
    store_of,
)
from simindex.db.connection import Bind, PgConnection
from simindex.db.entry import Entry, KeptEntry, Query
from simindex.db.minhash_store import MinHashStore
from simindex.db.objects import index_sql
from simindex.db.simhash_store import SimHashStore
from simindex.errors import KeyNotIndexedError, LowRecallWarning
from simindex.ops import build as build_op
from simindex.ops import by_key as by_key_op
from simindex.ops import clusters as clusters_op
from simindex.ops import create as create_op
from simindex.ops import near as near_op
from simindex.ops import pairs as pairs_op
from simindex.ops import similar as similar_op
from simindex.ops import stats as stats_op
from simindex.ops.batch import DEFAULT_MAX_TEXT_BYTES
from simindex.ops.build import BuildReport, Progress
from simindex.ops.clusters import (
    ClusterMember,
    ClusterMethod,
    ClusterProgress,
    ClusterReport,
    Survivor,
)
from simindex.ops.near import Match
from simindex.ops.pairs import IdenticalGroup, NearPair, PairsProgress, SimilarPair
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
    check_schema(index_schema)
    check_name(name)
    chosen = method if method is not None else SimHash()
    create_op.checked_spec(chosen)  # bad arguments fail before any database work
    with session(bind, index_schema) as conn:
        create_op.create(conn, index_schema, name, table, column, chosen, key=key, schema=schema)
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
        create_op.drop(conn, index_schema, name, missing_ok=missing_ok)


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
        self._kept = KeptEntry(self.index_schema, self.name)

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

    def sql(self) -> str:
        """The SQL creating this index runs, as a rebuild would make it again (for its table
        as it is now): the catalog row, side tables and their indexes, row-level security
        policies, query functions, queue, trigger function and triggers, each statement ended
        by ``;``. Only printed: nothing is run (``simindex sql NAME``)."""
        with session(self.bind, self.index_schema) as conn:
            return index_sql(conn, self.index_schema, self.name)

    def _ready(self, conn: PgConnection) -> tuple[IndexInfo, Store]:
        """The catalog entry and store, kept from the last call's while the catalog row is
        the same; an index not built raises."""
        entry = self._kept.ready(conn)
        return entry.info, entry.store

    def fingerprint(self, text: str | None) -> int | SimilarArguments | None:
        """What this index's SQL functions take for ``text``, computed as the index computes
        it: for SimHash the fingerprint as a signed ``bigint`` (``to_signed`` of the unsigned
        64-bit SimHash, see :mod:`simindex.fingerprint`), for
        ``<name>_near_v1(fingerprint => ...)``;
        for MinHash the two arrays ``<name>_similar_v1(signature, band_keys)`` takes.
        None for a text with no features (NULL, empty, punctuation only)."""
        with session(self.bind, self.index_schema) as conn:
            info = read_index(conn, self.index_schema, self.name)
        return _function_arguments(info, text)

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
        max_text_bytes: int | None = DEFAULT_MAX_TEXT_BYTES,
    ) -> BuildReport:
        """Fill the index from the source table (again, safely, when it was built before).

        Parameters:
            batch_size: rows per fetch and fingerprint task.
            workers: processes computing fingerprints (default: all cores for large tables).
            progress: called after each batch with (rows read, the source's row count).
            max_text_bytes: texts longer than this (UTF-8 bytes) are not read: they become
                failed items, as sync makes them (``report.failed`` counts them; None: no
                limit).

        A SimHash design sized to the table is chosen again for the counted rows; the new
        side tables, functions and delete triggers replace the old ones in one transaction.
        """
        return build_op.build(
            self.bind,
            self.name,
            index_schema=self.index_schema,
            batch_size=batch_size,
            workers=workers,
            progress=progress,
            max_text_bytes=max_text_bytes,
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
        functions take (an unsigned value is refused: ``simindex.fingerprint.to_signed`` converts).
        ``max_distance`` defaults to, and may not exceed, the index's. Sorted by distance, then
        key; ``limit`` keeps the first rows only (a text inside a cluster of thousands of
        copies). A text with no features (None, empty) has no neighbours: ``[]``.
        """

        def query(entry: Entry) -> Query | None:
            return near_op.query(
                entry.info,
                self._simhash_store(entry.store, "similar()"),
                text=text,
                fingerprint=fingerprint,
                max_distance=max_distance,
                limit=limit,
            )

        with reading(self.bind, self.index_schema, pin=False) as conn:  # see near_key
            _, rows = self._kept.query(conn, "near", query)
        return [Match(key, distance) for key, distance in rows]

    def near_key(
        self, key: Any, *, max_distance: int | None = None, limit: int | None = None
    ) -> list[Match]:
        """Rows within ``max_distance`` bits of the row with ``key`` (itself excluded), the
        nearest ``limit`` of them when given."""
        # On the connection as the caller left it: the query's statements name every function,
        # operator and type with its schema; by_key pins the path for anything else.
        with reading(self.bind, self.index_schema, pin=False) as conn:
            _, rows = by_key_op.by_key(
                conn, self._kept, key, measure="distance", bound=max_distance, limit=limit
            )
        return [Match(row[0], row[1]) for row in rows]

    def similar(
        self,
        text: str | None = None,
        *,
        key: Any = None,
        threshold: float | None = None,
        verify: Verify | None = None,
        limit: int | None = None,
    ) -> list[Similar]:
        """Rows whose Jaccard similarity to a text (or to the row with ``key``) reaches
        ``threshold`` (default: the index's), most similar first.

        Candidates come from the LSH bands. ``verify="exact"`` (the default) keeps those whose
        shingle sets, recomputed from the source texts, really reach the threshold, and
        reports that exact similarity; ``verify="estimate"`` keeps those whose signatures
        estimate it does, without reading any text (faster, but off by ±0.035 at J = 0.8
        with 128 values). ``limit`` keeps the most similar rows only.
        """
        mode = similar_op.verify_mode(verify)
        if mode == "estimate" and key is not None and text is None:
            with reading(self.bind, self.index_schema, pin=False) as conn:  # see near_key
                info, rows = by_key_op.by_key(
                    conn, self._kept, key, measure="similarity", bound=threshold, limit=limit
                )
            _warn_below_threshold(info, threshold)
            return similar_op.similars(map(itemgetter(0), rows), map(itemgetter(1), rows))
        if mode == "estimate" and key is None:

            def query(entry: Entry) -> Query | None:
                store = entry.store
                if not isinstance(store, MinHashStore):
                    raise TypeError(f"index {self.name!r} is a SimHash index: use near()")
                return similar_op.estimate_query(
                    entry.info, store, text=text, threshold=threshold, limit=limit
                )

            with reading(self.bind, self.index_schema, pin=False) as conn:  # see near_key
                entry, found = self._kept.query(conn, "similar", query)
            _warn_below_threshold(entry.info, threshold)
            return [Similar(found_key, similarity) for found_key, similarity, _ in found]
        with reading(self.bind, self.index_schema) as conn:
            info, store = self._ready(conn)
            if not isinstance(store, MinHashStore):
                raise TypeError(f"index {self.name!r} is a SimHash index: use near()")
            _warn_below_threshold(info, threshold)
            try:
                return similar_op.similar(
                    conn,
                    info,
                    store,
                    text=text,
                    key=key,
                    threshold=threshold,
                    verify=mode,
                    limit=limit,
                )
            except KeyNotIndexedError:
                raise by_key_op.why_not_indexed(conn, info, key) from None

    @overload
    def pairs(
        self,
        *,
        max_distance: int | None = None,
        threshold: float | None = None,
        verify: Verify | None = None,
        progress: PairsProgress | None = None,
        groups: Literal[False] = False,
    ) -> Iterator[NearPair | SimilarPair]: ...

    @overload
    def pairs(
        self,
        *,
        max_distance: int | None = None,
        threshold: float | None = None,
        verify: Verify | None = None,
        progress: PairsProgress | None = None,
        groups: bool,
    ) -> Iterator[NearPair | SimilarPair | IdenticalGroup]: ...

    def pairs(
        self,
        *,
        max_distance: int | None = None,
        threshold: float | None = None,
        verify: Verify | None = None,
        progress: PairsProgress | None = None,
        groups: bool = False,
    ) -> Iterator[NearPair | SimilarPair | IdenticalGroup]:
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
            _warn_below_threshold(info, threshold)
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
            _warn_below_threshold(info, threshold)
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


@dataclass(frozen=True, slots=True)
class SimilarArguments:
    """A text's MinHash as ``<name>_similar_v1(sketch, band_keys, threshold, max_rows,
    set_hash)`` takes it: the sketch as a bit string's hexadecimal input (``X...``)."""

    sketch: str
    band_keys: tuple[int, ...]
    set_hash: int


def _function_arguments(info: IndexInfo, text: str | None) -> int | SimilarArguments | None:
    """The signed fingerprint (SimHash) or the sketch, band keys and set hash (MinHash) of
    ``text``; None for a text with no features."""
    spec = info.spec
    if isinstance(spec.method, SimHash):
        values, present = spec.simhash_values([text])
        return to_signed(int(values[0])) if present[0] else None
    store = store_of(info)
    assert isinstance(store, MinHashStore)
    signatures, lengths = spec.minhash_values([text])
    if not lengths[0]:
        return None
    sketch, band_keys, set_hash = store.query_arguments(signatures[0])
    return SimilarArguments(sketch, tuple(band_keys), set_hash)


def _warn_below_threshold(info: IndexInfo, threshold: float | None) -> None:
    """A LowRecallWarning for a MinHash threshold below the one the index's bands are tuned
    for (the caller's caller is the line warned about)."""
    method = info.spec.method
    valid = isinstance(threshold, int | float) and not isinstance(threshold, bool)
    if not valid or isinstance(method, SimHash) or not 0 <= threshold < method.threshold:  # type: ignore[operator]
        return  # nothing to warn of, or a wrong threshold that its check refuses
    warnings.warn(
        f"threshold {threshold} is below the {method.threshold} index {info.name!r} was tuned "
        "for: its LSH bands find pairs that are similar only by chance (recall falls fast below "
        "the tuned threshold); create an index with a lower threshold instead",
        LowRecallWarning,
        stacklevel=3,
    )
