"""Exact verification over collapsed rows: a template copied 5,000 times is read 5,000 times,
not compared 12.5 million times.

Rows with identical MinHash signatures collapse to one node (:func:`simindex.ops.pairs.collapse`)
before the band self-joins. Identical signatures only estimate identical texts, so each node
with more than one row is split into *classes*: its rows whose shingle sets are equal,
compared in full. Two rows of one class are exactly similar (1.0) with no work per pair. Two
classes, of one node or of two candidate nodes, are compared once, and every pair of their
rows shares that score. What this yields is what verifying every row pair would: the candidate
node pairs are the candidate row pairs, and a pair's score depends on its two sets only.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from psycopg import sql

from simindex.db.connection import PgConnection
from simindex.db.statements import statement
from simindex.ops.verify import ShingleSets, jaccard

_FETCH_ROWS = 2000


@dataclass(frozen=True, slots=True)
class ExactClass:
    """Rows whose shingle sets are equal, in the database's key order; ``values`` their set."""

    keys: tuple[Any, ...]
    values: NDArray[np.uint64]


@dataclass(frozen=True, slots=True)
class ClassPair:
    """Two classes at this exact Jaccard similarity (every pair of their rows is at it)."""

    left: ExactClass
    right: ExactClass
    similarity: float


def node_classes(conn: PgConnection, sets: ShingleSets) -> dict[Any, list[ExactClass]]:
    """The classes of each node of more than one row (``simindex_node_of``, made by
    ``collapse`` in this transaction), the node's own key's class first."""
    with conn.cursor() as cursor:
        rows = cursor.execute(statement("pairs_groups")).fetchall()
    classes: dict[Any, list[ExactClass]] = {}
    for node, group in itertools.groupby(rows, key=lambda row: row[0]):
        keys = [key for _, key in group]
        found = sets.lookup(keys)
        by_set: dict[bytes, list[Any]] = {}
        values: dict[bytes, NDArray[np.uint64]] = {}
        for key in keys:
            if key in found:
                identity = found[key].tobytes()  # the whole set: equal bytes, equal sets
                by_set.setdefault(identity, []).append(key)
                values.setdefault(identity, found[key])
        if by_set:
            classes[node] = [ExactClass(tuple(keys), values[i]) for i, keys in by_set.items()]
    return classes


def class_pairs(
    conn: PgConnection,
    sets: ShingleSets,
    classes: dict[Any, list[ExactClass]],
    candidates: sql.Composed,
    threshold: float,
) -> Iterator[ClassPair]:
    """The pairs of classes at ``threshold`` or above: inside each node, then across the
    candidate node pairs (``candidates``: node pairs by left node, read through a server-side
    cursor, the texts of single-row nodes read between two fetches)."""
    for node_classes_ in classes.values():
        for left, right in itertools.combinations(node_classes_, 2):
            score = jaccard(left.values, right.values)
            if score >= threshold:
                yield ClassPair(left, right, score)
    with conn.cursor(name="simindex_exact_classes") as cursor:
        cursor.itersize = _FETCH_ROWS
        cursor.execute(candidates)
        while rows := cursor.fetchmany(_FETCH_ROWS):
            single = [key for row in rows for key in row[:2] if key not in classes]
            found = sets.lookup(single)
            for left_node, right_node, *_ in rows:
                lefts = _classes_of(left_node, classes, found)
                rights = _classes_of(right_node, classes, found)
                for left in lefts:
                    for right in rights:
                        score = jaccard(left.values, right.values)
                        if score >= threshold:
                            yield ClassPair(left, right, score)


def _classes_of(
    node: Any, classes: dict[Any, list[ExactClass]], found: dict[Any, NDArray[np.uint64]]
) -> list[ExactClass]:
    """A node's classes: its own row alone when it has one row (none if that row is gone)."""
    held = classes.get(node)
    if held is not None:
        return held
    values = found.get(node)
    return [] if values is None else [ExactClass((node,), values)]
