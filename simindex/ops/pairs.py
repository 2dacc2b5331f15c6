"""Every near-duplicate pair of an index, found in SQL and streamed.

SimHash: two fingerprints within k bits agree on the prefix of at least one Manku table, so a
self-join of the side table on each table's prefix (``p >> shift``) finds every
pair; a pair is reported by the first table that finds it only. MinHash: a self-join of the
band table on each band, each pair reported by the first band the two rows share, verified by
the signatures' estimate in SQL or by the exact similarity of the texts (:mod:`.verify`).
Rows are streamed as PostgreSQL sends them: memory stays flat however many pairs there are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from simindex.db.catalog import IndexInfo, Store
from simindex.db.connection import PgConnection
from simindex.db.minhash_store import MinHashStore
from simindex.db.simhash_store import SimHashStore
from simindex.db.statements import statement
from simindex.ops.near import check_distance
from simindex.ops.similar import check_threshold, verify_mode
from simindex.ops.verify import ShingleSets, Verify, exact_floor, exact_pairs

PairsProgress = Callable[[int, int], None]
"""Called after each Manku table or band with (parts done, parts in all)."""


@dataclass(frozen=True, slots=True)
class NearPair:
    """Two rows of a SimHash index within ``distance`` bits; ``left < right``."""

    left: Any
    right: Any
    distance: int


@dataclass(frozen=True, slots=True)
class SimilarPair:
    """Two rows of a MinHash index with this Jaccard ``similarity`` (exact, or estimated when
    verified by the estimate); ``left < right``."""

    left: Any
    right: Any
    similarity: float


def pairs_queries(
    info: IndexInfo,
    store: Store,
    *,
    max_distance: int | None,
    threshold: float | None,
    simhash_table: sql.Composable | None = None,
    floor: float | None = None,
) -> list[sql.Composed]:
    """One query per Manku table or band, with the limit checked; MinHash candidates are kept
    from an estimate of ``floor`` (default: the threshold) up."""
    if isinstance(store, SimHashStore):
        if threshold is not None:
            raise TypeError(f"index {info.name!r} is a SimHash index: give max_distance")
        limit = sql.Literal(check_distance(store, max_distance))
        return [
            store.pairs_query(position, limit, simhash_table)
            for position in range(store.design.table_count)
        ]
    if max_distance is not None:
        raise TypeError(f"index {info.name!r} is a MinHash index: give threshold")
    lowest = sql.Literal(check_threshold(info.spec, threshold) if floor is None else floor)
    return [store.pairs_query(band, lowest) for band in range(store.design.num_bands)]


def exact_candidates(
    conn: PgConnection, info: IndexInfo, store: MinHashStore, threshold: float | None
) -> tuple[ShingleSets, sql.Composed, float]:
    """What exact verification of a MinHash index's pairs needs: the cache of shingle sets,
    every candidate pair down to the estimate floor (ordered by left key, so each left row's
    set is read once), and the threshold."""
    limit = check_threshold(info.spec, threshold)
    floor = exact_floor(limit, store.num_perm)
    queries = pairs_queries(info, store, max_distance=None, threshold=limit, floor=floor)
    ordered = statement("pairs_ordered", pairs=sql.SQL("\nUNION ALL\n").join(queries))
    return ShingleSets(conn, info.source, info.spec.method.shingling), ordered, limit


def pairs(
    conn: PgConnection,
    info: IndexInfo,
    store: Store,
    *,
    max_distance: int | None = None,
    threshold: float | None = None,
    verify: Verify | None = None,
    progress: PairsProgress | None = None,
) -> Iterator[NearPair | SimilarPair]:
    """See :meth:`simindex.index.Index.pairs`."""
    queries = pairs_queries(info, store, max_distance=max_distance, threshold=threshold)
    if isinstance(store, SimHashStore) and verify is not None:
        raise TypeError(f"index {info.name!r} is a SimHash index: it has no verify")
    make = NearPair if isinstance(store, SimHashStore) else SimilarPair
    conn.execute(statement("pairs_work_mem"))
    if isinstance(store, MinHashStore) and verify_mode(verify) == "exact":
        sets, candidates, limit = exact_candidates(conn, info, store, threshold)
        for left, right, score in exact_pairs(conn, sets, candidates, limit):
            yield SimilarPair(left, right, score)
        if progress is not None:
            progress(len(queries), len(queries))
        return
    for done, query in enumerate(queries, 1):
        # stream(), not a named cursor: PostgreSQL never plans a cursor's query in
        # parallel, and single-row mode keeps memory just as flat.
        for left, right, score in conn.cursor().stream(query):
            yield make(left, right, score)
        if progress is not None:
            progress(done, len(queries))
