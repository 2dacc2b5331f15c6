"""MinHash queries: band candidates, verified by the estimate in SQL or exactly from the texts."""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter
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
from simindex.db.source import Source, key_errors
from simindex.db.statements import statement
from simindex.errors import KeyNotIndexedError
from simindex.ops.verify import (
    DEFAULT_VERIFY,
    Verify,
    check_verify,
    exact_floor,
    exact_scores,
    no_select,
    source_texts,
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
        # Rows of the query's own shingle set (the stored set hash) score 1 unread.
        scored = [(found, 1.0) for found, _, identical in rows if identical]
        wanted = [row[0] for row in rows if not row[2]]
        texts = _texts(conn, source, key if by_key else _NO_KEY, wanted)
        if by_key:
            if key not in texts:  # the row went since it was indexed
                return []
            text = texts[key]
        scored += exact_scores(info.spec, text, [(k, texts[k]) for k in wanted if k in texts])
    kept = [(-score, found) for found, score in scored if score >= lowest]
    try:
        ordered = sorted(kept)
    except TypeError:
        # Keys Python cannot compare with each other (dates with some in their text form,
        # simindex.db.keys): equal similarities in the order the index answered them.
        ordered = sorted(kept, key=itemgetter(0))
    return [Similar(found, -score) for score, found in ordered[:limit]]


_NO_KEY = object()


def _texts(
    conn: PgConnection, source: Source, key: Any, wanted: list[Any]
) -> dict[Any, str | None]:
    """The texts of ``wanted`` keys, and of ``key`` (unless _NO_KEY) in the same statement
    when it is of their type (the array of keys is one type)."""
    texts: dict[Any, str | None] = {}
    batches = [wanted] if key is _NO_KEY else [[key, *wanted]]
    if key is not _NO_KEY and not all(type(found) is type(key) for found in wanted):
        batches = [[key], wanted]
    for keys in batches:
        for rows in source_texts(conn, source, keys):
            texts.update(rows)
    return texts


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
