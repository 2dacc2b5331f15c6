"""Verifying MinHash candidates: by the signatures' estimate in SQL, or exactly from the texts.

``"estimate"``: the similarity two one-bit sketches estimate (:mod:`simindex.core.packing`),
computed where the candidates are found (SQL); its standard error is about
``sqrt((1 - J**2) / sketch_bits)``, ±0.014 at J = 0.8 with 1,792 bits (0.014 to 0.015
measured on long texts, with the empty bins' borrowed values), larger on a text of only a
handful of shingles, so pairs near the threshold fall on either side of it by chance. Rows of the
same shingle set (equal stored set hashes) score 1 exactly.

``"exact"``: the Jaccard similarity of the two shingle sets themselves, recomputed in Python
from the source rows' texts: a query's candidates are read in one statement, each distinct
text shingled once in one batch and all scored at once (:func:`exact_scores`); pairs read
each text once while it stays in a bounded cache (:class:`ShingleSets`). Candidates whose
estimate is more than :data:`FLOOR_STANDARD_ERRORS` standard errors of 128 values below the
threshold are not read (0.66 at 0.8), and reading every band candidate's text would cost far
more. Rows of the query's own shingle set are not read either: their
stored set hash says they score 1.
"""

from __future__ import annotations

import itertools
import math
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Literal

import numpy as np
import psycopg
from numpy.typing import NDArray
from psycopg import sql

from simindex.core.minhash import by_owner, set_hash
from simindex.core.spec import IndexSpec
from simindex.core.text import EMPTY
from simindex.db.catalog import IndexInfo, lock_source
from simindex.db.connection import PgConnection
from simindex.db.keys import install, key_cursor
from simindex.db.pg_array import key_array
from simindex.db.source import Source
from simindex.db.statements import statement
from simindex.errors import MissingRightError

Verify = Literal["estimate", "exact"]
VERIFY_MODES: tuple[Verify, ...] = ("estimate", "exact")
DEFAULT_VERIFY: Verify = "exact"
FLOOR_STANDARD_ERRORS = 4.0
# Shingle hashes the cache of one call holds (8 bytes each): 128 MB.
CACHE_FEATURES = 16_000_000
_FETCH_ROWS = 5000


def check_verify(verify: object) -> Verify:
    """``verify`` if it names a mode; ValueError otherwise."""
    if verify not in VERIFY_MODES:
        raise ValueError(f"verify must be 'estimate' or 'exact', got {verify!r}")
    return verify


def exact_floor(threshold: float, values: int = 128) -> float:
    """The lowest estimate exact verification still looks at, for pairs at ``threshold``: the
    error of ``values`` independent values, 128 by default. A sketch's estimate is closer on
    long texts, but a short text's bins borrow their values from its few shingles, so its
    error is about that of as many values as the text has shingles (±0.04 at 100)."""
    error = math.sqrt(threshold * (1.0 - threshold) / values)
    return max(0.0, threshold - FLOOR_STANDARD_ERRORS * error)


def jaccard(first: NDArray[np.uint64], second: NDArray[np.uint64]) -> float:
    """Jaccard similarity of two sorted arrays of distinct values (0 for two empty ones)."""
    if len(first) == len(second) and np.array_equal(first, second):
        return 1.0 if len(first) else 0.0
    both = len(np.intersect1d(first, second, assume_unique=True))
    return both / (len(first) + len(second) - both)


class ShingleSets:
    """Shingle sets of source rows by key: each text read and shingled once, then kept while
    the cache has room (least recently used first out)."""

    def __init__(
        self,
        conn: PgConnection,
        source: Source,
        spec: IndexSpec,
        *,
        capacity: int = CACHE_FEATURES,
    ) -> None:
        self.conn = conn
        self.spec = spec
        self.source = source
        self.capacity = capacity
        self.texts_read = 0
        self._sets: OrderedDict[Any, NDArray[np.uint64]] = OrderedDict()
        self._size = 0
        self._query = texts_statement(source)

    def of_text(self, text: str | None) -> NDArray[np.uint64]:
        """The set of a text's features (its shingle hashes as the index sees them), sorted."""
        return np.unique(self.spec.features([text])[0])

    def lookup(self, keys: Iterable[Any]) -> dict[Any, NDArray[np.uint64]]:
        """The sets of ``keys``, reading the rows not held yet (a row that is gone is left
        out)."""
        wanted = list(dict.fromkeys(keys))
        found: dict[Any, NDArray[np.uint64]] = {}
        missing = []
        for key in wanted:
            held = self._sets.get(key)
            if held is None:
                missing.append(key)
            else:
                self._sets.move_to_end(key)
                found[key] = held
        for rows in source_texts(self.conn, self.source, missing, self._query):
            # One call for the chunk's texts: tokenising and hashing run over the batch.
            features = self.spec.features([text for _, text in rows])
            for (key, _), hashes in zip(rows, features, strict=True):
                found[key] = self._put(key, np.unique(hashes))
                self.texts_read += 1
        return found

    def _put(self, key: Any, values: NDArray[np.uint64]) -> NDArray[np.uint64]:
        self._sets[key] = values
        self._size += len(values)
        while self._size > self.capacity and self._sets:
            _, dropped = self._sets.popitem(last=False)
            self._size -= len(dropped)
        return values


def no_select(conn: PgConnection, source: Source, exc: psycopg.Error) -> MissingRightError:
    """The error of exact verification by a role that may not read the source table."""
    table = f"{source.schema}.{source.table}"
    role = conn.info.user
    return MissingRightError(
        f"exact verification reads the texts of table {table}, which role {role!r} may "
        f"not read ({exc.diag.message_primary}): the table's owner gives it with "
        f"GRANT SELECT ON {table} TO {role}"
    )


def texts_statement(source: Source) -> sql.Composed:
    """The statement reading the texts of a list of keys (``source_texts_of_keys``)."""
    return statement(
        "source_texts_of_keys",
        key=sql.Identifier(source.key_column),
        text=sql.Identifier(source.text_column),
        table=source.identifier,
    )


def source_texts(
    conn: PgConnection, source: Source, keys: Sequence[Any], query: sql.Composed | None = None
) -> Iterator[list[tuple[Any, str | None]]]:
    """The (key, text) rows of ``keys`` that still exist, ``_FETCH_ROWS`` keys a statement."""
    query = texts_statement(source) if query is None else query
    for start in range(0, len(keys), _FETCH_ROWS):
        chunk = keys[start : start + _FETCH_ROWS]
        try:
            wanted = key_array(conn, chunk)  # before the cursor copies adapters
            yield key_cursor(conn, source.key_type).execute(query, {"keys": wanted}).fetchall()
        except psycopg.errors.InsufficientPrivilege as exc:
            raise no_select(conn, source, exc) from exc


def locked_texts(
    conn: PgConnection, info: IndexInfo, batches: Sequence[Sequence[Any]]
) -> dict[Any, str | None]:
    """The texts of the keys of ``batches`` (keys of one type each: one array a statement)
    whose rows still exist, read with the source table locked and checked
    (:func:`~simindex.db.catalog.lock_source`), which holds until the transaction ends: one
    of its own on a connection in autocommit, else the caller's (in a savepoint).

    In autocommit, two round trips where five would be: BEGIN, the lock and the check's
    catalog read go in one pipeline, then, once the check passed, the texts and COMMIT in
    another. The texts are read only after the check, as in a transaction step by step: a
    table changed meanwhile is never read. Errors are those of the steps, in their order."""
    if (
        conn.autocommit
        and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        and psycopg.Pipeline.is_supported()
    ):
        return _pipelined_texts(conn, info, batches)
    with conn.transaction():
        source = _locked_source(conn, info)
        texts: dict[Any, str | None] = {}
        for keys in batches:
            for rows in source_texts(conn, source, keys):
                texts.update(rows)
        return texts


_IN_TRANSACTION = (psycopg.pq.TransactionStatus.INTRANS, psycopg.pq.TransactionStatus.INERROR)


def _locked_source(conn: PgConnection, info: IndexInfo) -> Source:
    try:
        return lock_source(conn, info)  # LOCK TABLE needs SELECT on it, as reading does
    except psycopg.errors.InsufficientPrivilege as exc:
        raise no_select(conn, info.source, exc) from exc


def _pipelined_texts(
    conn: PgConnection, info: IndexInfo, batches: Sequence[Sequence[Any]]
) -> dict[Any, str | None]:
    """:func:`locked_texts` on a connection in autocommit, outside a transaction."""
    cursors: list[psycopg.Cursor[Any]] = []
    try:
        with conn.pipeline() as pipeline:
            conn.execute(statement("source_locked_begin"))
            try:
                source = lock_source(conn, info, pipeline)  # one round trip with BEGIN
            except psycopg.errors.InsufficientPrivilege as exc:
                raise no_select(conn, info.source, exc) from exc
            query = texts_statement(source)
            for keys in batches:
                for start in range(0, len(keys), _FETCH_ROWS):
                    wanted = key_array(conn, keys[start : start + _FETCH_ROWS])
                    cursor = key_cursor(conn, source.key_type)
                    cursors.append(cursor.execute(query, {"keys": wanted}))
            conn.execute(statement("source_locked_commit"))
        texts: dict[Any, str | None] = {}
        for cursor in cursors:
            texts.update(cursor.fetchall())
        return texts
    except psycopg.errors.InsufficientPrivilege as exc:  # reading the texts
        raise no_select(conn, info.source, exc) from exc
    finally:
        if conn.info.transaction_status in _IN_TRANSACTION:
            conn.rollback()  # a step failed: the transaction it began is rolled back


def jaccard_with(
    query: NDArray[np.uint64], features: Sequence[NDArray[np.uint64]]
) -> NDArray[np.float64]:
    """``[jaccard(query, np.unique(row)) for row in features]`` for a sorted array of distinct
    values ``query``, computed for all rows at once (:func:`_distinct_rows`, then
    :func:`_jaccard_distinct`). The quotients are those of :func:`jaccard` (the counts are
    exact in a double, and a quotient of two doubles is rounded once)."""
    if not len(features):
        return np.zeros(0)
    values, rows = _distinct_rows(features)
    return _jaccard_distinct(query, values, rows, len(features))


def _distinct_rows(
    features: Sequence[NDArray[np.uint64]],
) -> tuple[NDArray[np.uint64], NDArray[np.intp]]:
    """Each row's distinct values, ascending, rows one after another, and the row of each:
    one sort of them all (by row, then value: :func:`~simindex.core.minhash.by_owner`) for
    what ``np.unique`` would do row by row."""
    sizes = np.fromiter(map(len, features), np.intp, len(features))
    return _distinct_concatenated(np.concatenate(features) if sizes.sum() else EMPTY, sizes)


def _distinct_concatenated(
    values: NDArray[np.uint64], sizes: NDArray[Any]
) -> tuple[NDArray[np.uint64], NDArray[np.intp]]:
    """:func:`_distinct_rows` of rows given one after another in ``values``, ``sizes[i]``
    values the row ``i``."""
    rows = np.repeat(np.arange(len(sizes)), sizes)
    order = by_owner(values, rows, len(sizes))
    values, rows = values[order], rows[order]
    distinct = np.ones(len(values), np.bool_)
    distinct[1:] = (values[1:] != values[:-1]) | (rows[1:] != rows[:-1])
    return values[distinct], rows[distinct]


def _jaccard_distinct(
    query: NDArray[np.uint64], values: NDArray[np.uint64], rows: NDArray[np.intp], count: int
) -> NDArray[np.float64]:
    """The Jaccard similarity of ``query`` (sorted, distinct) with each of ``count`` rows given
    as :func:`_distinct_rows` gives them: the shared values by a binary search in ``query``."""
    counts = np.bincount(rows, minlength=count)
    if len(query):
        places = np.minimum(np.searchsorted(query, values), len(query) - 1)
        both = np.bincount(rows[query[places] == values], minlength=count)
    else:
        both = np.zeros(count, np.int64)
    union = len(query) + counts - both
    scores: NDArray[np.float64] = np.divide(both, union, out=np.zeros(count), where=union > 0)
    return scores


def exact_scores(
    spec: IndexSpec, query: str | None, texts: Sequence[str | None]
) -> tuple[list[float], list[int]]:
    """The exact Jaccard similarity of each text's shingle set with ``query``'s, and the
    set's hash as the index stores it (:func:`simindex.core.minhash.set_hash`): each
    distinct text shingled once, the query's in the same batch, and the sets of them all
    made by one sort."""
    places: dict[str | None, int] = {query: 0}
    indexes = [places.setdefault(text, len(places)) for text in texts]
    values, rows = _distinct_concatenated(*spec.features_concatenated(list(places)))
    cuts = np.searchsorted(rows, np.arange(len(places) + 1)).tolist()
    scores = _jaccard_distinct(values[cuts[0] : cuts[1]], values, rows, len(places))
    # Stored as the bigint of the same 64 bits (simindex.core.packing).
    hashes = np.array([set_hash(values[a:b]) for a, b in itertools.pairwise(cuts)], np.uint64).view(
        np.int64
    )
    return scores[indexes].tolist(), hashes[indexes].tolist()


def exact_pairs(
    conn: PgConnection,
    sets: ShingleSets,
    candidates: sql.Composed,
    threshold: float,
    *,
    chunk: int = 2000,
) -> Iterator[tuple[Any, Any, float]]:
    """(left, right, exact Jaccard) of the candidate pairs (``left_key``, ``right_key``, ...)
    that reach ``threshold``. The candidates come through a server-side cursor, ``chunk`` at a
    time, and the texts of a chunk are read between two fetches on the same connection."""
    with conn.cursor(name="simindex_exact_pairs") as cursor:
        cursor.itersize = chunk
        install(cursor.adapters)
        cursor.execute(candidates)
        while rows := cursor.fetchmany(chunk):
            found = sets.lookup(key for row in rows for key in row[:2])
            for left, right, *_ in rows:
                if left in found and right in found:
                    score = jaccard(found[left], found[right])
                    if score >= threshold:
                        yield left, right, score
