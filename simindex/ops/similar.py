"""MinHash queries: band candidates, verified by the estimate in SQL or exactly from the texts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from simindex.core import validators
from simindex.core.spec import IndexSpec, MinHash
from simindex.db.catalog import IndexInfo, lock_source
from simindex.db.connection import PgConnection
from simindex.db.entry import Query
from simindex.db.keys import key_cursor
from simindex.db.minhash_store import MinHashStore
from simindex.db.source import key_errors
from simindex.db.statements import statement
from simindex.errors import KeyNotIndexedError
from simindex.ops.verify import (
    DEFAULT_VERIFY,
    ShingleSets,
    Verify,
    check_verify,
    exact_floor,
    exact_scores,
    no_select,
)


@dataclass(frozen=True, slots=True)
class Similar:
    """A MinHash neighbour: its key and Jaccard similarity (exact, or the signatures' estimate
    when verified by it)."""

    key: Any
    similarity: float


def check_threshold(spec: IndexSpec, threshold: float | None) -> float:
    """``threshold``, or the index's when None."""
    assert isinstance(spec.method, MinHash)
    return validators.threshold(threshold, spec.method.threshold)


def verify_mode(verify: Verify | None) -> Verify:
    """The verification asked for: ``verify``, else the default."""
    return DEFAULT_VERIFY if verify is None else check_verify(verify)


def similar(
    conn: PgConnection,
    info: IndexInfo,
    store: MinHashStore,
    *,
    text: str | None,
    key: Any,
    threshold: float | None,
    verify: Verify,
    limit: int | None = None,
    indexed: bool | None = None,
) -> list[Similar]:
    """See :meth:`simindex.index.Index.similar`."""
    by_key = key is not None
    if by_key == (text is not None):
        raise TypeError("give exactly one of text= or key=")
    validators.limit(limit)
    # Exact verification may reorder: it takes every candidate and cuts afterwards.
    fetch = limit if verify == "estimate" else None
    lowest = check_threshold(info.spec, threshold)
    floor = exact_floor(lowest) if verify == "exact" else lowest
    if by_key:
        if indexed is False:
            raise KeyNotIndexedError.of(info.name, key)
        with key_errors(info.source, key):
            rows = (
                key_cursor(conn)
                .execute(
                    statement("minhash_similar_key", function=store.similar_key_function),
                    {"key": key, "threshold": floor, "limit": fetch},
                )
                .fetchall()
            )
            if (
                not rows
                and indexed is None
                and not conn.execute(
                    statement("minhash_key_indexed", table=store.table()),
                    {"key": key},
                ).fetchone()
            ):
                raise KeyNotIndexedError.of(info.name, key)
    else:
        made = _by_text(store, info.spec, text, floor, fetch)
        if made is None:
            return []
        rows = key_cursor(conn).execute(made[0](), made[2]).fetchall()
    if verify == "estimate":
        return [Similar(found_key, float(similarity)) for found_key, similarity, _ in rows]
    if not rows:
        return []
    # The texts are read with the source locked and checked (lock_source), which holds until
    # the transaction ends: one of its own on an autocommit connection.
    with conn.transaction():
        try:
            source = lock_source(conn, info)  # LOCK TABLE needs SELECT on it, as reading does
        except psycopg.errors.InsufficientPrivilege as exc:
            raise no_select(conn, info.source, exc) from exc
        sets = ShingleSets(conn, source, info.spec)
        if by_key:
            query = sets.lookup([key]).get(key)
            if query is None:  # the row went since it was indexed
                return []
        else:
            query = sets.of_text(text)
        # Rows of the query's own shingle set (the stored set hash) score 1 unread.
        same = [found for found, _, identical in rows if identical]
        scored = [(found, 1.0) for found in same]
        scored += exact_scores(sets, query, [row[0] for row in rows if not row[2]])
    kept = [Similar(found, score) for found, score in scored if score >= lowest]
    try:
        return sorted(kept, key=lambda match: (-match.similarity, match.key))[:limit]
    except TypeError:
        # Keys Python cannot compare with each other (dates with some in their text form,
        # simindex.db.keys): equal similarities in the order the index answered them.
        return sorted(kept, key=lambda match: -match.similarity)[:limit]


def estimate_query(
    info: IndexInfo,
    store: MinHashStore,
    *,
    text: str | None,
    threshold: float | None,
    limit: int | None,
) -> Query | None:
    """The statement of :func:`similar` by text verified by the estimate, its order and its
    parameters, checked; None for a text with no features (no statement: no rows). Its rows
    are (key, similarity, identical)."""
    validators.limit(limit)
    return _by_text(store, info.spec, text, check_threshold(info.spec, threshold), limit)


def _by_text(
    store: MinHashStore, spec: IndexSpec, text: str | None, floor: float, fetch: int | None
) -> Query | None:
    values, lengths = spec.minhash_values([text])
    if not lengths[0]:
        return None
    sketch, band_keys, set_hash = store.query_arguments(values[0])
    return (
        lambda: statement("minhash_similar", function=store.similar_function),
        _ORDER,
        {
            "sketch": sketch,
            "band_keys": band_keys,
            "threshold": floor,
            "limit": fetch,
            "set_hash": set_hash,
        },
    )


_ORDER = sql.SQL("q.similarity DESC, q.identical DESC, q.key")
