"""MinHash queries: band candidates, verified by the estimate in SQL or exactly from the texts."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from contextlib import nullcontext
from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter
from typing import Any

from psycopg import sql

from simindex.core import validators
from simindex.core.spec import IndexSpec, MinHash
from simindex.db.catalog import IndexInfo
from simindex.db.connection import PgConnection
from simindex.db.entry import Query
from simindex.db.keys import key_cursor
from simindex.db.minhash_store import MinHashStore
from simindex.db.source import key_errors
from simindex.db.statements import statement
from simindex.db.triggers import Triggers
from simindex.errors import KeyNotIndexedError
from simindex.ops.verify import (
    DEFAULT_VERIFY,
    Verify,
    check_verify,
    exact_floor,
    exact_scores,
    locked_texts,
)


@dataclass(frozen=True, slots=True)
class Similar:
    """A MinHash neighbour: its key and Jaccard similarity (exact, or the signatures' estimate
    when verified by it)."""

    key: Any
    similarity: float


_FEW = 16
_new = object.__new__
# The slots' member descriptors (what the frozen class's __setattr__ would refuse).
_set_key = vars(Similar)["key"].__set__
_set_similarity = vars(Similar)["similarity"].__set__


def similars(keys: Iterable[Any], similarities: Iterable[float]) -> list[Similar]:
    """``[Similar(key, similarity) ...]`` of the pairs, equal to what ``Similar`` makes, made
    by the slots' descriptors: the frozen class's ``__init__`` (two ``object.__setattr__``
    calls an instance) costs twice as much, milliseconds for a template's thousands of
    identical copies (a few are made by ``__init__``: the descriptors' setup costs more)."""
    keys = list(keys)
    if len(keys) < _FEW:
        return list(map(Similar, keys, similarities))
    made = list(map(_new, repeat(Similar, len(keys))))
    deque(map(_set_key, made, keys), 0)
    deque(map(_set_similarity, made, similarities), 0)
    return made


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
        query = statement("minhash_similar_key", function=store.similar_key_function)
        params = {"key": key, "threshold": floor, "limit": fetch}
    else:
        made = _by_text(store, info.spec, text, floor, fetch)
        if made is None:
            return []
        query, params = made[0](), made[2]
    if verify == "exact":
        waiting = Triggers(info.index_schema, info.name, info.source, store)
        query = statement(
            "minhash_exact_candidates",
            table=store.table(),
            query=query,
            inbox=waiting.inbox,
            queue=waiting.queue,
            failed=waiting.failed,
        )
    with key_errors(info.source, key) if by_key else nullcontext():
        rows = key_cursor(conn, info.source.key_type).execute(query, params).fetchall()
        if (
            by_key
            and not rows
            and indexed is None
            and not conn.execute(
                statement("minhash_key_indexed", table=store.table()), {"key": key}
            ).fetchone()
        ):
            raise KeyNotIndexedError.of(info.name, key)
    if verify == "estimate":
        return [Similar(found_key, float(similarity)) for found_key, similarity, _ in rows]
    if not rows:
        return []
    if rows[0][3]:
        # Changes not synced yet: a stored set hash may be older than its row's text, so
        # every text is read and scored.
        same: list[Any] = []
        others: list[tuple[Any, int | None]] = [(row[0], None) for row in rows]
    else:
        # Rows of the query's own shingle set (the stored set hash) score 1 unread; they
        # come first, in the database's order (similarity 1, identical first).
        count = _leading_identical(rows)
        same = list(map(itemgetter(0), rows[:count]))
        others = [(found, stored) for found, _, stored, _ in rows[count:]]
    scored = _exact(conn, info, key if by_key else _NO_KEY, text, others)
    if scored is None:  # the query's row went since it was indexed
        return []
    kept = [(-score, found) for found, score in scored if score >= lowest]
    if kept and min(kept, key=itemgetter(0))[0] <= -1.0:
        # Another set scoring 1 (a stored set hash gone stale): among the rows of the query's
        # own set, by key.
        kept += [(-1.0, found) for found in same]
        same = []
    _by_similarity(kept, rows)
    answer = similars(same[:limit], repeat(1.0))
    rest = None if limit is None else limit - len(answer)
    if rest is None or rest > 0:
        kept = kept[:rest]
        answer += similars(map(itemgetter(1), kept), [-score for score, _ in kept])
    return answer


def _leading_identical(rows: list[Any]) -> int:
    """How many rows of the query's own set lead ``rows`` (ordered by similarity, identical
    first: all of them), counted without a Python step a row: thousands for a template."""
    flags = list(map(itemgetter(1), rows))
    count = flags.index(False) if False in flags else len(flags)
    if True in flags[count:]:
        raise AssertionError("rows of the query's own set after another row")
    return count


def _by_similarity(kept: list[tuple[float, Any]], rows: list[Any]) -> None:
    """Sorts (-similarity, key) pairs; keys Python cannot compare with each other (dates with
    some in their text form, simindex.db.keys) keep the order the index answered them in
    ``rows`` among equal similarities."""
    try:
        kept.sort()
    except TypeError:
        place = {row[0]: number for number, row in enumerate(rows)}
        kept.sort(key=lambda pair: (pair[0], place[pair[1]]))


_NO_KEY = object()


def _exact(
    conn: PgConnection,
    info: IndexInfo,
    key: Any,
    text: str | None,
    candidates: list[tuple[Any, int | None]],
) -> list[tuple[Any, float]] | None:
    """(key, exact Jaccard similarity to the query) of each (key, stored set hash) candidate
    whose row still exists; None when the query's own row (``key``, unless _NO_KEY) is gone.

    Candidates of one stored set hash share one set, so one text a set is read and scored:
    its first key's. When that text's set is not the stored one (the row changed since it was
    indexed) or the row is gone, every text of the set is read. Two different sets of one hash
    are a 64-bit collision (about 2**-64 a pair), taken as one set, as the rows of the query's
    own set are. The texts are read with the source locked and checked (:func:`locked_texts`);
    those of a set read again, in a second such read."""
    spec = info.spec
    members: dict[Any, list[Any]] = {}
    for found, stored in candidates:
        members.setdefault(found if stored is None else stored, []).append(found)
    first = [keys[0] for keys in members.values()]
    texts = _texts(conn, info, key, first)
    if key is not _NO_KEY:
        if key not in texts:
            return None
        text = texts[key]
    read = [found for found in first if found in texts]
    scores, hashes = exact_scores(spec, text, [texts[found] for found in read])
    scored: list[tuple[Any, float]] = []
    checked = dict(zip(read, zip(scores, hashes, strict=True), strict=True))
    stale: list[Any] = []
    for stored, keys in members.items():
        first_scored = checked.get(keys[0])
        if first_scored is None:  # the first row is gone: the others are read
            stale += keys[1:]
        elif len(keys) == 1 or first_scored[1] == stored:
            scored += zip(keys, repeat(first_scored[0]))
        else:  # the first row changed since it was indexed
            scored.append((keys[0], first_scored[0]))
            stale += keys[1:]
    if stale:
        more = _texts(conn, info, _NO_KEY, stale)
        wanted = [found for found in stale if found in more]
        scores, _ = exact_scores(spec, text, [more[found] for found in wanted])
        scored += zip(wanted, scores, strict=True)
    return scored


def _texts(
    conn: PgConnection, info: IndexInfo, key: Any, wanted: list[Any]
) -> dict[Any, str | None]:
    """The texts of ``wanted`` keys, and of ``key`` (unless _NO_KEY) in the same statement
    when it is of their type (the array of keys is one type)."""
    batches = [wanted] if key is _NO_KEY else [[key, *wanted]]
    if key is not _NO_KEY and not all(type(found) is type(key) for found in wanted):
        batches = [[key], wanted]
    return locked_texts(conn, info, batches)


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
