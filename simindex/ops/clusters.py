"""Clusters of near-duplicates, written to the index's ``<name>_clusters`` table.

``method="pairs"``: connected components of the all-pairs graph (:mod:`simindex.ops.pairs`),
computed inside PostgreSQL by label propagation with pointer jumping over temporary tables, so
the Python process holds nothing but a counter. Identical rows (equal SimHash fingerprints,
identical MinHash signatures) are collapsed to one node first (:func:`simindex.ops.pairs.collapse`),
so a thousand exact copies cost one node, not half a million pairs.

``method="bottom_k"``: the stable min-hash cluster key of seed 000 -- the XOR of the k
smallest feature hashes of a row -- computed per row with no comparisons; rows with equal keys
form a cluster.

Either way a cluster's id is its smallest key, and a row with no near-duplicate is a cluster of
its own: an unrelated new row never changes another row's cluster id.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import psycopg
from psycopg import sql

from simindex.core import validators
from simindex.core.bits import to_signed
from simindex.core.minhash import bottom_k_key
from simindex.db.answers import visible_function
from simindex.db.catalog import IndexInfo, Store, catalog, lock_source, store_of
from simindex.db.cluster_store import ClusterStore
from simindex.db.connection import PgConnection
from simindex.db.copytext import field
from simindex.db.keys import install
from simindex.db.minhash_store import MinHashStore
from simindex.db.privileges import OWNER, back_to_caller, become_owner
from simindex.db.simhash_store import SimHashStore
from simindex.db.source import refuse_policies
from simindex.db.statements import run, statement
from simindex.errors import IndexNotReadyError
from simindex.ops.pairs import (
    collapse,
    pairs_queries,
    verified_classes,
)
from simindex.ops.similar import verify_mode
from simindex.ops.verify import Verify

ClusterProgress = Callable[[str, int, int | None], None]
"""Called with (step, done, total or None): steps are "pairs", "components" and "rows"."""

ClusterMethod = Literal["pairs", "leader", "bottom_k"]
CLUSTER_METHODS: tuple[ClusterMethod, ...] = ("pairs", "leader", "bottom_k")
_MAX_ROUNDS = 1000
_READ_ROWS = 5000
_COPY_EDGES = 10_000


@dataclass(frozen=True, slots=True)
class ClusterReport:
    """What a clustering run wrote. ``pairs``: the edges that joined rows into clusters.
    Identical rows are one node (equal fingerprints, or signatures verified by the estimate),
    or, verified exactly, rows of equal texts join their first one and each two such groups
    join once: fewer than the pairs :func:`simindex.ops.pairs.pairs` finds among the rows."""

    method: str
    rows: int
    clusters: int
    duplicate_rows: int
    largest: int
    pairs: int
    rounds: int
    seconds: float


def clusters(
    conn: PgConnection,
    info: IndexInfo,
    store: Store,
    *,
    method: ClusterMethod = "pairs",
    max_distance: int | None = None,
    threshold: float | None = None,
    verify: Verify | None = None,
    bottom_k: int = 4,
    progress: ClusterProgress | None = None,
) -> ClusterReport:
    """See :meth:`simindex.index.Index.clusters`."""
    if method not in CLUSTER_METHODS:
        raise ValueError(f"method must be 'pairs', 'leader' or 'bottom_k', got {method!r}")
    if verify is not None and method != "pairs":
        reason = "sync keeps them in SQL, by the estimate" if method == "leader" else "no pairs"
        raise TypeError(f"{method} clusters take no verify ({reason})")
    if verify is not None and isinstance(store, SimHashStore):
        raise TypeError(f"index {info.name!r} is a SimHash index: it has no verify")
    started = time.perf_counter()
    report = _no_progress if progress is None else progress
    target = ClusterStore(info.index_schema, info.name)
    reader = None
    if method == "bottom_k":
        if max_distance is not None or threshold is not None:
            raise TypeError("bottom_k clusters take no max_distance or threshold")
        validators.positive("bottom_k", bottom_k)
        reader = _source_reader(conn, info)
    # Clusters are simindex's tables: made and written as its owner role (the source, above,
    # is read with the caller's rights).
    run(conn, become_owner())
    target.create(conn, info.source)
    key_type = sql.SQL(info.source.key_type)
    if reader is not None:
        rows = _bottom_k(conn, info, target, key_type, reader, bottom_k, report)
        edges = rounds = 0
    else:
        # Exact verification collapses rows itself, into classes of equal shingle sets
        # (_exact_links), and labels every row of the signatures table.
        exact = (
            isinstance(store, MinHashStore) and method == "pairs" and verify_mode(verify) == "exact"
        )
        if method == "leader" and (max_distance is not None or threshold is not None):
            raise TypeError(
                "leader clusters use the index's own max_distance or threshold, as sync does"
            )
        edges, rounds = _components(
            conn,
            info,
            store,
            key_type,
            max_distance,
            threshold,
            report,
            leader=method == "leader",
            exact=exact,
        )
        conn.execute(statement("clusters_truncate", table=target.table))
        if isinstance(store, MinHashStore) and exact:
            members = statement("clusters_minhash_members")
        else:
            members = statement("clusters_collapsed_members")
        rows = conn.execute(
            statement("clusters_replace", table=target.table, members=members)
        ).rowcount
    report("rows", rows, rows)
    if method == "leader":
        target.create_assign_function(conn, info.source, store)
    conn.execute(
        statement("clusters_set_method", catalog=catalog(info.index_schema)),
        {"method": method, "name": info.name},
    )
    summary = conn.execute(statement("clusters_summary", table=target.table)).fetchone()
    assert summary is not None
    run(conn, back_to_caller())
    total, cluster_count, largest, duplicate_rows = (int(value) for value in summary)
    return ClusterReport(
        method=method,
        rows=total,
        clusters=cluster_count,
        duplicate_rows=duplicate_rows,
        largest=largest,
        pairs=edges,
        rounds=rounds,
        seconds=round(time.perf_counter() - started, 3),
    )


@dataclass(frozen=True, slots=True)
class ClusterMember:
    """One row of a cluster of ``size`` rows."""

    cluster_id: Any
    key: Any
    size: int


@dataclass(frozen=True, slots=True)
class Survivor:
    """One row of a cluster of ``cluster_size`` > 1 rows, and whether it is the one to keep."""

    cluster_id: Any
    key: Any
    cluster_size: int
    survivor: bool


def members(conn: PgConnection, info: IndexInfo, *, min_size: int = 2) -> Iterator[ClusterMember]:
    """See :meth:`simindex.index.Index.cluster_members`."""
    validators.positive("min_size", min_size)
    target, store = _existing(conn, info)
    side = store.table()
    with conn.cursor(name="simindex_cluster_members") as cursor:
        cursor.itersize = _READ_ROWS
        install(cursor.adapters)
        cursor.execute(
            statement(
                "clusters_members",
                table=target.table,
                side=side,
                visible=visible_function(info.index_schema, info.name),
            ),
            {"min_size": min_size},
        )
        for cluster_id, key, size in cursor:
            yield ClusterMember(cluster_id, key, int(size))


_PREFER = ("smallest_key", "largest_key", "longest_text", "shortest_text")
_PREFER_COLUMN = re.compile(r"(newest|oldest):.+", re.DOTALL)


def survivors(
    conn: PgConnection, info: IndexInfo, *, method: ClusterMethod, prefer: str = "smallest_key"
) -> Iterator[Survivor]:
    """See :meth:`simindex.index.Index.survivors`."""
    if method not in CLUSTER_METHODS:
        raise ValueError(
            f"method must be {', '.join(CLUSTER_METHODS)} (the clusters run whose survivors "
            f"you mean), got {method!r}"
        )
    if not isinstance(prefer, str):
        raise TypeError(f"prefer must be a str, got {type(prefer).__name__}")
    if prefer not in _PREFER and not _PREFER_COLUMN.fullmatch(prefer):
        raise ValueError(
            f"prefer must be {', '.join(_PREFER)}, newest:<column> or oldest:<column>, "
            f"got {prefer!r}"
        )
    target, _ = _existing(conn, info)
    if info.clustering != method:
        raise ValueError(
            f"the clusters of index {info.name!r} are of its last clusters run, method "
            f"{info.clustering or 'none'}, not {method}: run clusters(method={method!r}) "
            f"first, or ask for the survivors of {info.clustering or 'none'}"
        )
    with conn.cursor(name="simindex_survivors") as cursor:
        cursor.itersize = _READ_ROWS
        install(cursor.adapters)
        try:
            cursor.execute(
                statement("clusters_survivors", function=target.survivors_function),
                {"clustering": method, "prefer": prefer},
            )
            for cluster_id, key, size, survivor in cursor:
                yield Survivor(cluster_id, key, int(size), bool(survivor))
        except psycopg.errors.InvalidParameterValue as exc:  # a column the table lacks
            raise ValueError(exc.diag.message_primary) from exc


def _existing(conn: PgConnection, info: IndexInfo) -> tuple[ClusterStore, Store]:
    """The index's cluster objects and store, once its clusters have been made."""
    store = store_of(info)
    target = ClusterStore(info.index_schema, info.name)
    qualified = target.table.as_string(conn)
    if not conn.execute(statement("clusters_exists"), {"table": qualified}).fetchone()[0]:  # type: ignore[index]
        raise IndexNotReadyError(
            f"index {info.name!r} has no clusters yet: run clusters() (or `simindex clusters "
            f"{info.name}`) first"
        )
    return target, store


def _no_progress(step: str, done: int, total: int | None) -> None:
    pass


def _components(
    conn: PgConnection,
    info: IndexInfo,
    store: Store,
    key_type: sql.Composable,
    max_distance: int | None,
    threshold: float | None,
    progress: ClusterProgress,
    *,
    leader: bool,
    exact: bool,
) -> tuple[int, int]:
    """Fill the temporary node/label tables; (pairs used, rounds).

    Components: every node takes the smallest label around it until none changes. Leader:
    every node starts from its nearest earlier neighbour's label; pointer jumping then carries
    each chain's first node's label down it.
    """
    conn.execute(statement("pairs_work_mem"))
    # Checked before any work.
    queries = pairs_queries(info, store, max_distance=max_distance, threshold=threshold)
    if not exact:
        queries = pairs_queries(
            info,
            store,
            max_distance=max_distance,
            threshold=threshold,
            side=_collapse_as_caller(conn, info, store),
        )
    conn.execute(statement("clusters_edges", key_type=key_type))
    rank = sql.SQL("p.distance" if isinstance(store, SimHashStore) else "-p.similarity")
    edges = 0
    if exact:
        assert isinstance(store, MinHashStore)
        edges = _exact_edges(conn, info, store, threshold)
        progress("pairs", len(queries), len(queries))
    else:
        for done, query in enumerate(queries, 1):
            inserted = conn.execute(statement("clusters_insert_edges", pairs=query, rank=rank))
            edges += inserted.rowcount
            progress("pairs", done, len(queries))
    labels = "leader_labels" if leader else "labels"
    for block in ("nodes", "nodes_index", "links", labels, "labels_key", "analyze"):
        conn.execute(statement(f"clusters_{block}"))
    if leader:
        rounds = 0
        while conn.execute(statement("clusters_jump")).rowcount:
            rounds += 1
        progress("components", rounds, rounds)
        return edges, rounds
    rounds = 0
    while True:
        rounds += 1
        if rounds > _MAX_ROUNDS:
            raise RuntimeError(f"label propagation did not settle in {_MAX_ROUNDS} rounds")
        changed = conn.execute(statement("clusters_propagate")).rowcount
        while conn.execute(statement("clusters_jump")).rowcount:
            pass
        progress("components", rounds, None)
        if not changed:
            return edges, rounds


def _collapse_as_caller(conn: PgConnection, info: IndexInfo, store: Store) -> sql.Identifier:
    """:func:`~simindex.ops.pairs.collapse` as the caller, who reads the source (the owner
    role may not), its tables shown to the owner role, which writes the clusters from them."""
    run(conn, back_to_caller())
    side = collapse(conn, info, store)
    _share_grouping(conn)
    run(conn, become_owner())
    return side


def _share_grouping(conn: PgConnection) -> None:
    """Let the owner role read the caller's temporary tables of :func:`collapse`."""
    conn.execute(statement("clusters_share_grouping", owner=sql.Identifier(OWNER)))


def _source_reader(conn: PgConnection, info: IndexInfo) -> psycopg.ServerCursor[Any]:
    """A server-side cursor over the source's keys and texts, the table locked and checked
    (and refused when its row-level security applies to the caller: no policy of the table's
    owner runs as anyone else)."""
    source = lock_source(conn, info)
    refuse_policies(conn, source)
    reader = conn.cursor(name="simindex_bottom_k")
    reader.itersize = _READ_ROWS
    install(reader.adapters)
    reader.execute(
        statement(
            "source_read",
            key=sql.Identifier(source.key_column),
            text=sql.Identifier(source.text_column),
            table=source.identifier,
        )
    )
    return reader


def _exact_edges(
    conn: PgConnection, info: IndexInfo, store: MinHashStore, threshold: float | None
) -> int:
    """Fill the edges with the exactly verified pairs (COPY between two cursor fetches).

    The texts are read with the caller's rights, the source locked and checked first; the
    edges, simindex's, are written as its owner."""
    run(conn, back_to_caller())
    refuse_policies(conn, lock_source(conn, info))
    lines: list[str] = []
    edges = 0

    def flush() -> None:
        run(conn, become_owner())
        with conn.cursor().copy(statement("clusters_copy_edges")) as copy:
            copy.write("".join(lines))
        run(conn, back_to_caller())
        lines.clear()

    for left, right, score in _exact_links(conn, info, store, threshold):
        lines.append(f"{field(left)}\t{field(right)}\t{-score!r}\n")
        edges += 1
        if len(lines) >= _COPY_EDGES:
            flush()
    if lines:
        flush()
    _share_grouping(conn)  # the members are the collapsed rows (clusters_minhash_members)
    run(conn, become_owner())
    return edges


def _exact_links(
    conn: PgConnection, info: IndexInfo, store: MinHashStore, threshold: float | None
) -> Iterator[tuple[Any, Any, float]]:
    """Exactly verified edges enough to connect what every verified pair connects, over
    collapsed rows: each class of identical rows as a star on its first key, and one edge per
    pair of classes (:mod:`.exact_classes`)."""
    classes, class_pairs = verified_classes(conn, info, store, threshold)
    for each in classes:
        yield from ((each.keys[0], key, 1.0) for key in each.keys[1:])
    for pair in class_pairs:
        yield pair.left.keys[0], pair.right.keys[0], pair.similarity


def _bottom_k(
    conn: PgConnection,
    info: IndexInfo,
    target: ClusterStore,
    key_type: sql.Composable,
    reader: psycopg.ServerCursor[Any],
    k: int,
    progress: ClusterProgress,
) -> int:
    """Compute every row's bottom-k key from its text and group rows by it."""
    conn.execute(statement("clusters_bottom_k_keys", key_type=key_type))
    read = 0
    with reader:
        # A COPY cannot run while the cursor is mid-fetch: one short COPY per batch.
        while batch := reader.fetchmany(_READ_ROWS):
            lines = []
            features = info.spec.features([text for _, text in batch])
            for (key, _), hashes in zip(batch, features, strict=True):
                value = bottom_k_key(hashes, k)
                if value is not None:
                    lines.append(f"{field(key)}\t{to_signed(value)}\n")
            with conn.cursor().copy(statement("clusters_bottom_k_copy")) as copy:
                copy.write("".join(lines))
            read += len(batch)
            progress("rows", read, None)
    conn.execute(statement("clusters_truncate", table=target.table))
    return int(conn.execute(statement("clusters_bottom_k_replace", table=target.table)).rowcount)
