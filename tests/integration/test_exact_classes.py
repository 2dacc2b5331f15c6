"""Exact verification over collapsed rows gives what verifying every candidate row pair gives.

Rows with identical MinHash signatures collapse to one node; each node splits into classes of
equal shingle sets. With only 16 values, near copies one word apart often share a signature,
so nodes here hold rows of different texts: the split is exercised, not only assumed.
"""

from __future__ import annotations

import itertools
import random
from collections import defaultdict
from typing import Any

import numpy as np
import psycopg
import pytest

from simindex.core.spec import MinHash
from simindex.db.catalog import store_of
from simindex.db.minhash_store import MinHashStore
from simindex.index import Index, create_index
from simindex.ops.pairs import IdenticalGroup, SimilarPair, exact_candidates
from simindex.ops.verify import exact_pairs, jaccard
from tests.integration.test_clusters import components

WORDS = [f"w{i}" for i in range(600)]
THRESHOLD = 0.7


def corpus() -> list[str]:
    """Templates with exact copies, copies one word apart (often the same signature at 16
    values) and copies further apart, among unrelated rows."""
    rng = random.Random(5)
    texts: list[str] = []
    for copies in (30, 12, 6):
        template = [rng.choice(WORDS) for _ in range(60)]
        texts += [" ".join(template)] * copies
        for changes in (1, 1, 1, 2, 4, 8):
            near = list(template)
            for _ in range(changes):
                near[rng.randrange(len(near))] = rng.choice(WORDS)
            texts += [" ".join(near)] * rng.choice((1, 3))
    texts += [" ".join(rng.choice(WORDS) for _ in range(60)) for _ in range(120)]
    rng.shuffle(texts)
    return texts


@pytest.fixture
def index(database_dsn: str) -> Index:
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE notes (id integer PRIMARY KEY, body text)")
        with conn.cursor().copy("COPY notes (id, body) FROM STDIN") as copy:
            for key, text in enumerate(corpus(), 1):
                copy.write_row((key, text))
    made = create_index(
        database_dsn, "notes", "notes", "body", method=MinHash(threshold=THRESHOLD, num_perm=16)
    )
    made.build()
    return made


def every_candidate_verified(dsn: str, index: Index) -> dict[tuple[int, int], float]:
    """The pairs of verifying every candidate row pair, rows not collapsed (the path of
    indexes whose rows do not collapse)."""
    info = index.info()
    store = store_of(info)
    assert isinstance(store, MinHashStore)
    with psycopg.connect(dsn) as conn:
        sets, candidates, limit = exact_candidates(conn, info, store, None)
        return {(a, b): s for a, b, s in exact_pairs(conn, sets, candidates, limit)}


def test_pairs_over_classes_are_those_of_every_candidate(database_dsn: str, index: Index) -> None:
    info = index.info()
    shingling = info.spec.method.shingling
    with psycopg.connect(database_dsn) as conn:
        rows = conn.execute(
            "SELECT m.key, (m.set_hash, m.sketch)::text, n.body FROM simindex.notes_minhash AS m "
            "JOIN notes AS n ON n.id = m.key"
        ).fetchall()
    sets = {key: np.unique(shingling.hashes(text)) for key, _, text in rows}
    by_signature: dict[str, set[bytes]] = defaultdict(set)
    for key, signature, _ in rows:
        by_signature[signature].add(sets[key].tobytes())
    # A node (the same set hash and sketch) holds one shingle set: rows of different texts
    # under one 128-value signature, which the corpus plants, are apart.
    assert all(len(texts) == 1 for texts in by_signature.values())

    expected = every_candidate_verified(database_dsn, index)
    assert len(expected) > 1000
    everything = list(index.pairs())
    found = {(p.left, p.right): p.similarity for p in everything if isinstance(p, SimilarPair)}
    assert len(found) == len(everything)
    assert found == pytest.approx(expected)
    for (a, b), similarity in found.items():
        assert similarity == pytest.approx(jaccard(sets[a], sets[b]))
        assert similarity >= THRESHOLD

    # Groups of identical texts, and the pairs between them by first keys, expand to the same.
    items = list(index.pairs(groups=True, verify="exact"))
    groups = [item.keys for item in items if isinstance(item, IdenticalGroup)]
    assert max(len(group) for group in groups) >= 30
    for group in groups:
        assert len({sets[key].tobytes() for key in group}) == 1
    members = {group[0]: group for group in groups}
    expanded: dict[tuple[int, int], float] = {}
    for group in groups:
        for pair in itertools.combinations(group, 2):
            expanded[pair] = 1.0
    for item in items:
        if isinstance(item, SimilarPair):
            for a in members.get(item.left, (item.left,)):
                for b in members.get(item.right, (item.right,)):
                    expanded[(min(a, b), max(a, b))] = item.similarity
    assert expanded == pytest.approx(expected)
    assert len(items) < len(expected) / 5


def test_clusters_over_classes_are_the_components_of_every_verified_pair(
    database_dsn: str, index: Index
) -> None:
    expected = every_candidate_verified(database_dsn, index)
    index.clusters()
    with psycopg.connect(database_dsn) as conn:
        clusters: dict[Any, Any] = dict(
            conn.execute("SELECT key, cluster_id FROM simindex.notes_clusters")
        )
    assert clusters == components(sorted(clusters), list(expected))
    assert len(set(clusters.values())) < len(clusters) - 40


def test_groups_with_exact_verification_need_keys_python_orders(database_dsn: str) -> None:
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE named (id text PRIMARY KEY, body text)")
        conn.execute("INSERT INTO named VALUES ('a', 'one two three four'), ('b', 'x y z w')")
    named = create_index(database_dsn, "named", "named", "body", method=MinHash(threshold=0.7))
    named.build()
    with pytest.raises(ValueError, match="integer or uuid"):
        list(named.pairs(groups=True, verify="exact"))
    assert list(named.pairs()) == []
