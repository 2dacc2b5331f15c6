"""Exact verification's scores of many rows at once, held to the Jaccard of one pair at a time
(``jaccard`` over ``np.unique`` of each text's features): equal as floats, not approximately;
and each text's set hash as the index stores it; and the answers made from them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simindex.core.spec import MinHash, resolve
from simindex.core.text import Shingling
from simindex.ops.similar import Similar, similars
from simindex.ops.verify import exact_scores, jaccard, jaccard_with

# Few distinct values, so rows share many of them and repeat some.
values = st.lists(st.integers(0, 40).map(np.uint64), max_size=30).map(
    lambda row: np.array(row, np.uint64)
)


@settings(deadline=None)
@given(query=values, rows=st.lists(values, max_size=12))
def test_scores_of_many_rows_are_those_of_each_pair(
    query: np.ndarray, rows: list[np.ndarray]
) -> None:
    query = np.unique(query)
    expected = [jaccard(query, np.unique(row)) for row in rows]
    assert jaccard_with(query, rows).tolist() == expected


def test_large_hashes_and_no_rows() -> None:
    top = np.uint64(2**64 - 1)
    query = np.array([0, 5, top], np.uint64)
    rows = [np.array([top, top, 5], np.uint64), np.zeros(0, np.uint64), query[::-1].copy()]
    assert jaccard_with(query, rows).tolist() == [2 / 3, 0.0, 1.0]
    assert jaccard_with(query, []).tolist() == []
    assert jaccard_with(np.zeros(0, np.uint64), rows[1:2]).tolist() == [0.0]


words = st.lists(st.sampled_from(["a", "b", "c", "d", "É", "x_y", "東京"]), max_size=12)


@settings(deadline=None)
@given(query=words, texts=st.lists(st.one_of(st.none(), words.map(" ".join)), max_size=10))
def test_exact_scores_are_the_jaccard_of_each_text(
    query: list[str], texts: list[str | None]
) -> None:
    spec = resolve(MinHash(shingling=Shingling(size=2)))
    shingling = spec.method.shingling
    expected = [
        jaccard(np.unique(shingling.hashes(" ".join(query))), np.unique(shingling.hashes(text)))
        for text in texts
    ]
    scores, set_hashes = exact_scores(spec, " ".join(query), texts)
    assert scores == expected
    # Each set's hash is the one the index stores for its text (a text without features has
    # no row).
    stored, lengths = spec.minhash_values(texts)
    indexed = [found for found, length in zip(set_hashes, lengths, strict=True) if length]
    assert indexed == stored[lengths > 0, -1].view(np.int64).tolist()


@given(pairs=st.lists(st.tuples(st.one_of(st.integers(), st.text()), st.floats(0, 1))))
def test_similars_are_what_similar_makes(pairs: list[tuple[object, float]]) -> None:
    made = similars([key for key, _ in pairs], [score for _, score in pairs])
    assert made == [Similar(key, score) for key, score in pairs]
    assert [repr(found) for found in made] == [repr(Similar(*pair)) for pair in pairs]
    assert all(type(found) is Similar for found in made)
    for found in made[:1]:
        with pytest.raises(dataclasses.FrozenInstanceError):
            found.similarity = 0.0  # type: ignore[misc]


def test_many_similars_are_what_similar_makes() -> None:
    keys = [*range(30), "a", None, 2.5]
    made = similars(keys, [1.0 / (1 + n) for n in range(len(keys))])
    assert made == [Similar(key, 1.0 / (1 + n)) for n, key in enumerate(keys)]
    assert len({type(found) for found in made}) == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        made[-1].key = 0  # type: ignore[misc]
