"""Every near-duplicate pair of an index, found in SQL and streamed.

SimHash: two fingerprints within k bits agree on the prefix of at least one Manku table, so a
self-join of the side table on each table's prefix (``p >> shift``) finds every
pair; a pair is reported by the first table that finds it only. MinHash: a self-join of the
side table on each band key, each pair reported by the first band the two rows share, verified by
the signatures' estimate in SQL or by the exact similarity of the texts (:mod:`.verify`).
Rows are streamed as PostgreSQL sends them: memory stays flat however many pairs there are.

Identical rows first collapse to one node (:func:`collapse`): SimHash rows with equal
fingerprints, MinHash rows with identical signatures, compared in full. The
self-joins then run over one row per node; a pair of nodes stands for every pair of their rows,
and the rows of one node are pairs among themselves. ``groups=True`` reports those as
:class:`IdenticalGroup` values instead of m(m-1)/2 pairs, and node pairs by their smallest keys.
Equal signatures are an estimate of equal texts: exact verification of MinHash pairs splits
each node into classes of equal shingle sets and compares classes, not rows
(:mod:`.exact_classes`), where keys order in Python as in PostgreSQL (integers, uuid); with
other keys it verifies every candidate row pair.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from simindex.core import validators
from simindex.db.catalog import IndexInfo, Store, lock_source
from simindex.db.connection import PgConnection
from simindex.db.keys import key_cursor
from simindex.db.minhash_store import MinHashStore
from simindex.db.simhash_store import SimHashStore
from simindex.db.statements import statement
from simindex.ops.exact_classes import ClassPair, ExactClass, class_pairs, node_classes
from simindex.ops.similar import check_threshold, verify_mode
from simindex.ops.verify import ShingleSets, Verify, exact_floor, exact_pairs

# Key types whose order in Python is PostgreSQL's (text follows a collation): node pairs of
# these expand to row pairs here rather than by joins in SQL.
_PYTHON_ORDERED_KEYS = frozenset({"smallint", "integer", "bigint", "uuid"})

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


@dataclass(frozen=True, slots=True)
class IdenticalGroup:
    """Rows with equal fingerprints (SimHash) or identical signatures (MinHash), ascending:
    every two of them are a pair at distance 0 or similarity 1. With ``groups=True`` the first
    key stands for the group in the pairs reported."""

    keys: tuple[Any, ...]


def collapse(conn: PgConnection, info: IndexInfo, store: Store) -> sql.Identifier:
    """Make the temporary tables ``simindex_node_of (key, node)`` and ``simindex_distinct`` (one
    side-table row per node), for this transaction; the latter's name.

    Only rows whose key the source holds, as the current role reads it: a deleted row's index
    rows stay until the worker's sweep, and a role that sees every index row (a worker, an
    admin, a superuser) would otherwise find them in pairs and clusters. The source is locked
    and checked first, so its key is compared as the type the catalog recorded."""
    source = lock_source(conn, info)
    if isinstance(store, SimHashStore):
        side, identity = store.table(), sql.SQL("s.fingerprint")
    else:
        side, identity = store.table(), sql.SQL("s.set_hash, s.sketch")
    conn.execute(statement("pairs_drop_grouping"))
    conn.execute(
        statement(
            "pairs_node_of",
            side=side,
            identity=identity,
            source=source.identifier,
            key=sql.Identifier(source.key_column),
        )
    )
    conn.execute(statement("pairs_distinct", side=side))
    conn.execute(statement("pairs_analyze_grouping"))
    return sql.Identifier("simindex_distinct")


def pairs_queries(
    info: IndexInfo,
    store: Store,
    *,
    max_distance: int | None,
    threshold: float | None,
    side: sql.Composable | None = None,
    floor: float | None = None,
) -> list[sql.Composed]:
    """One query per Manku table or band, with the limit checked; over ``side`` (the
    collapsed rows) when given. MinHash candidates are kept from an estimate of ``floor``
    (default: the threshold) up."""
    if isinstance(store, SimHashStore):
        if threshold is not None:
            raise TypeError(f"index {info.name!r} is a SimHash index: give max_distance")
        limit = sql.Literal(validators.distance(max_distance, store.design.max_distance))
        return [
            store.pairs_query(position, limit, side) for position in range(store.design.table_count)
        ]
    if max_distance is not None:
        raise TypeError(f"index {info.name!r} is a MinHash index: give threshold")
    lowest = sql.Literal(check_threshold(info.spec, threshold) if floor is None else floor)
    return [
        store.pairs_query(band, lowest, signatures=side) for band in range(store.design.num_bands)
    ]


def exact_candidates(
    conn: PgConnection,
    info: IndexInfo,
    store: MinHashStore,
    threshold: float | None,
    side: sql.Composable | None = None,
) -> tuple[ShingleSets, sql.Composed, float]:
    """What exact verification of a MinHash index's pairs needs: the cache of shingle sets,
    every candidate pair (of ``side``'s rows, the collapsed ones, when given) down to the
    estimate floor, ordered by left key so each left row's set is read once, and the
    threshold."""
    limit = check_threshold(info.spec, threshold)
    floor = exact_floor(limit)
    queries = pairs_queries(info, store, max_distance=None, threshold=limit, side=side, floor=floor)
    ordered = statement("pairs_ordered", pairs=sql.SQL("\nUNION ALL\n").join(queries))
    return ShingleSets(conn, info.source, info.spec), ordered, limit


def verified_classes(
    conn: PgConnection, info: IndexInfo, store: MinHashStore, threshold: float | None
) -> tuple[list[ExactClass], Iterator[ClassPair]]:
    """Exact verification over collapsed rows (:mod:`.exact_classes`): every class of rows
    with equal shingle sets, and the pairs of classes at the threshold (read as iterated)."""
    sets, candidates, limit = exact_candidates(
        conn, info, store, threshold, side=collapse(conn, info, store)
    )
    classes = node_classes(conn, sets)
    every = [each for found in classes.values() for each in found]
    return every, class_pairs(conn, sets, classes, candidates, limit)


def exact_in_classes(info: IndexInfo, store: Store) -> bool:
    """Whether exact verification of this index's pairs runs over collapsed rows split into
    classes of equal shingle sets (:mod:`.exact_classes`): keys Python orders as PostgreSQL
    does (a class pair's rows are paired here)."""
    return info.source.key_type in _PYTHON_ORDERED_KEYS


def exact_verified(
    info: IndexInfo, store: Store, verify: Verify | None, *, groups: bool = False
) -> bool:
    """Whether pairs of ``store`` are verified exactly from the texts. ``groups=True`` groups
    rows by identical signatures, an estimate, unless told ``verify="exact"``: then by
    identical shingle sets, where :func:`exact_in_classes` allows it."""
    if isinstance(store, SimHashStore):
        if verify is not None:
            raise TypeError("a SimHash index has no verify")
        return False
    if groups:
        if verify == "exact" and not exact_in_classes(info, store):
            raise ValueError(
                f"groups=True with verify='exact' needs an index keyed by an integer "
                f"or uuid; index {info.name!r} is keyed by {info.source.key_type}: give "
                "verify='estimate' (or leave it out)"
            )
        return verify_mode(verify) == "exact" if verify is not None else False
    return verify_mode(verify) == "exact"


def pairs(
    conn: PgConnection,
    info: IndexInfo,
    store: Store,
    *,
    max_distance: int | None = None,
    threshold: float | None = None,
    verify: Verify | None = None,
    progress: PairsProgress | None = None,
    groups: bool = False,
) -> Iterator[NearPair | SimilarPair | IdenticalGroup]:
    """See :meth:`simindex.index.Index.pairs`."""
    if not isinstance(groups, bool):
        raise TypeError(f"groups must be a bool, got {type(groups).__name__}")
    simhash = isinstance(store, SimHashStore)
    make = NearPair if simhash else SimilarPair
    # Checked before any work.
    queries = pairs_queries(info, store, max_distance=max_distance, threshold=threshold)
    if isinstance(store, SimHashStore) and verify is not None:
        raise TypeError(f"index {info.name!r} is a SimHash index: it has no verify")
    exact = exact_verified(info, store, verify, groups=groups)
    conn.execute(statement("pairs_work_mem"))
    if exact and exact_in_classes(info, store):
        assert isinstance(store, MinHashStore)
        yield from _exact_by_classes(conn, info, store, threshold, groups=groups)
        if progress is not None:
            progress(len(queries), len(queries))
        return
    if exact:
        assert isinstance(store, MinHashStore)
        sets, candidates, limit = exact_candidates(conn, info, store, threshold)
        for left, right, similarity in exact_pairs(conn, sets, candidates, limit):
            yield SimilarPair(left, right, similarity)
        if progress is not None:
            progress(len(queries), len(queries))
        return
    side = collapse(conn, info, store)
    score = sql.SQL("distance" if simhash else "similarity")
    node_pairs = pairs_queries(
        info, store, max_distance=max_distance, threshold=threshold, side=side
    )
    # A group's keys come in the database's order, so its pairs keep left < right; made
    # here, they cost no row on the wire each.
    members: dict[Any, tuple[Any, ...]] = {}
    in_python = info.source.key_type in _PYTHON_ORDERED_KEYS
    rows = key_cursor(conn).stream(statement("pairs_groups"))
    for keys in (tuple(key for _, key in group) for _, group in _by_node(rows)):
        if groups:
            yield IdenticalGroup(keys)
            continue
        for left, right in itertools.combinations(keys, 2):
            yield NearPair(left, right, 0) if simhash else SimilarPair(left, right, 1.0)
        if in_python:
            members[keys[0]] = keys
    if groups:
        queries = node_pairs
    elif in_python:
        yield from _expanded(conn, node_pairs, members, make, progress)
        return
    else:
        queries = [statement("pairs_expanded", pairs=query, score=score) for query in node_pairs]
    for done, query in enumerate(queries, 1):
        # stream(), not a named cursor: PostgreSQL never plans a cursor's query in
        # parallel, and single-row mode keeps memory just as flat.
        for left, right, score in key_cursor(conn).stream(query):
            yield make(left, right, score)
        if progress is not None:
            progress(done, len(queries))


def _by_node(rows: Iterator[tuple[Any, ...]]) -> Iterator[tuple[Any, Iterator[Any]]]:
    """(node, its rows) of rows ordered by node."""
    return itertools.groupby(rows, key=lambda row: row[0])


def _expanded(
    conn: PgConnection,
    queries: list[sql.Composed],
    members: dict[Any, tuple[Any, ...]],
    make: type[NearPair] | type[SimilarPair],
    progress: PairsProgress | None,
) -> Iterator[NearPair | SimilarPair]:
    """The node pairs of ``queries``, each as every pair of the two nodes' rows."""
    for done, query in enumerate(queries, 1):
        for left, right, score in key_cursor(conn).stream(query):
            lefts, rights = members.get(left), members.get(right)
            if lefts is None and rights is None:
                yield make(left, right, score)
                continue
            for a in lefts or (left,):
                for b in rights or (right,):
                    yield make(a, b, score) if a < b else make(b, a, score)
        if progress is not None:
            progress(done, len(queries))


def _exact_by_classes(
    conn: PgConnection,
    info: IndexInfo,
    store: MinHashStore,
    threshold: float | None,
    *,
    groups: bool,
) -> Iterator[SimilarPair | IdenticalGroup]:
    """Exactly verified pairs over collapsed rows (:mod:`.exact_classes`): each class of
    identical rows as its pairs at 1.0 (or, with ``groups``, once as a group), then each pair
    of classes as its rows' pairs (or, with ``groups``, as the pair of their first keys)."""
    classes, class_pairs_ = verified_classes(conn, info, store, threshold)
    for each in classes:
        if groups:
            if len(each.keys) > 1:
                yield IdenticalGroup(each.keys)
            continue
        for left, right in itertools.combinations(each.keys, 2):
            yield SimilarPair(left, right, 1.0)
    for pair in class_pairs_:
        lefts, rights = pair.left.keys, pair.right.keys
        if groups:
            lefts, rights = lefts[:1], rights[:1]
        for a in lefts:
            for b in rights:
                yield (
                    SimilarPair(a, b, pair.similarity)
                    if a < b
                    else SimilarPair(b, a, pair.similarity)
                )
