"""Identical rows collapse to one node in pairs and clusters; the answers stay those of brute
force over every row, and ``groups=True`` reports each set of identical rows once."""

from __future__ import annotations

import itertools
import random
from collections import defaultdict
from typing import Any

import numpy as np
import psycopg
import pytest

from simindex.core.spec import MinHash, SimHash
from simindex.db.catalog import store_of
from simindex.db.minhash_store import MinHashStore
from simindex.index import Index, create_index
from simindex.ops.pairs import IdenticalGroup, NearPair, SimilarPair

WORDS = [f"w{i}" for i in range(800)]


def template_corpus() -> list[str]:
    """Templates with 40, 25 and 10 exact copies and a few near copies each, among others."""
    rng = random.Random(8)
    texts: list[str] = []
    for copies in (40, 25, 10):
        template = [rng.choice(WORDS) for _ in range(30)]
        texts += [" ".join(template)] * copies
        for _ in range(4):
            near = list(template)
            near[rng.randrange(len(near))] = rng.choice(WORDS)
            texts += [" ".join(near)] * 2  # near copies that are identical among themselves
    texts += [" ".join(rng.choice(WORDS) for _ in range(30)) for _ in range(150)]
    rng.shuffle(texts)
    return texts


def key_of(number: int, key_type: str) -> Any:
    """Integer keys (their pairs expand in Python), or text keys (in SQL, since a collation
    may order them unlike Python)."""
    return number if key_type == "integer" else f"{'Kk'[number % 2]}{number:04}"


def build(dsn: str, method: SimHash | MinHash, key_type: str) -> tuple[Index, list[str]]:
    texts = template_corpus()
    with psycopg.connect(dsn) as conn:
        conn.execute(f"CREATE TABLE notes (id {key_type} PRIMARY KEY, body text)")
        with conn.cursor().copy("COPY notes (id, body) FROM STDIN") as copy:
            for number, text in enumerate(texts):
                copy.write_row((key_of(number, key_type), text))
    index = create_index(dsn, "notes", "notes", "body", method=method)
    index.build()
    return index, texts


def database_order(dsn: str) -> dict[Any, int]:
    """Each key's place in the database's order (a text key's follows the collation)."""
    with psycopg.connect(dsn) as conn:
        keys = [key for (key,) in conn.execute("SELECT id FROM notes ORDER BY id")]
    return {key: place for place, key in enumerate(keys)}


def ordered(a: Any, b: Any, order: dict[Any, int]) -> tuple[Any, Any]:
    return (a, b) if order[a] < order[b] else (b, a)


def components(keys: list[Any], pairs: set[tuple[Any, Any]]) -> dict[Any, Any]:
    """Each key's smallest connected key; ``keys`` in the database's order."""
    parent = {key: key for key in keys}

    def root(key: Any) -> Any:
        while parent[key] != key:
            key = parent[key]
        return key

    place = {key: n for n, key in enumerate(keys)}
    for a, b in pairs:
        first, second = sorted((root(a), root(b)), key=place.__getitem__)
        if first != second:
            parent[second] = first
    return {key: root(key) for key in keys}


def check_against(
    index: Index, dsn: str, expected: dict[tuple[int, int], float], stored: dict[int, Any]
) -> None:
    """Pairs (expanded and grouped) and clusters agree with the brute-force pairs; ``stored``:
    each key's fingerprint or signature."""
    simhash = index.info().spec.kind == "simhash"
    same = 0.0 if simhash else 1.0
    # MinHash: pairs verified by the estimate, which the brute force computes (rows collapse
    # only then; exact verification reads every text).
    verify: dict[str, Any] = {} if simhash else {"verify": "estimate"}
    order = database_order(dsn)
    found = {(p.left, p.right): score(p) for p in index.pairs(**verify)}
    assert found == pytest.approx(expected)
    identical: dict[Any, list[int]] = defaultdict(list)
    for key, value in stored.items():
        identical[value].append(key)
    expected_groups = sorted(
        tuple(sorted(k, key=order.__getitem__)) for k in identical.values() if len(k) > 1
    )
    items = list(index.pairs(groups=True))
    groups = [item.keys for item in items if isinstance(item, IdenticalGroup)]
    assert sorted(groups) == expected_groups
    assert max(len(g) for g in groups) >= 40
    # Each group stands for its rows: expanding the node pairs gives every pair again.
    assert all(order[group[0]] < order[group[1]] for group in groups)
    members = {group[0]: group for group in groups}
    expanded: dict[tuple[int, int], float] = {}
    for group in groups:
        for pair in itertools.combinations(group, 2):
            expanded[pair] = same
    for item in items:
        if isinstance(item, IdenticalGroup):
            continue
        for a in members.get(item.left, (item.left,)):
            for b in members.get(item.right, (item.right,)):
                expanded[ordered(a, b, order)] = score(item)
    assert expanded == pytest.approx(expected)
    assert len(items) < len(expected) / 5
    index.clusters(**verify)
    with psycopg.connect(dsn) as conn:
        clusters: dict[Any, Any] = dict(
            conn.execute("SELECT key, cluster_id FROM simindex.notes_clusters")
        )
    assert clusters == components(sorted(stored, key=order.__getitem__), set(expected))


def score(pair: NearPair | SimilarPair) -> float:
    return float(pair.distance if isinstance(pair, NearPair) else pair.similarity)


KEY_TYPES = pytest.mark.parametrize("key_type", ["integer", "text"])


@KEY_TYPES
def test_simhash_identical_fingerprints(database_dsn: str, key_type: str) -> None:
    index, texts = build(database_dsn, SimHash(max_distance=3), key_type)
    order = database_order(database_dsn)
    values, _ = index.info().spec.simhash_values(texts)
    keys = [key_of(number, key_type) for number in range(len(texts))]
    expected = {}
    for a, b in itertools.combinations(range(len(texts)), 2):
        distance = int(np.bitwise_count(values[a] ^ values[b]))
        if distance <= 3:
            expected[ordered(keys[a], keys[b], order)] = float(distance)
    check_against(
        index, database_dsn, expected, {k: int(v) for k, v in zip(keys, values, strict=True)}
    )


@KEY_TYPES
def test_minhash_identical_signatures(database_dsn: str, key_type: str) -> None:
    index, _ = build(database_dsn, MinHash(threshold=0.7, num_perm=128), key_type)
    order = database_order(database_dsn)
    store = store_of(index.info())
    assert isinstance(store, MinHashStore)
    columns = ", ".join(f"b{band}" for band in range(store.design.num_bands))
    with psycopg.connect(database_dsn) as conn:
        stored = {
            key: (set_hash, *bands, sketch)
            for key, set_hash, bands, sketch in conn.execute(
                f"SELECT key, set_hash, ARRAY[{columns}], sketch::text FROM simindex.notes_minhash"
            )
        }
    expected = {}
    for a, b in itertools.combinations(sorted(stored, key=order.__getitem__), 2):
        x, y = stored[a], stored[b]
        if any(p == q for p, q in zip(x[1:-1], y[1:-1], strict=True)):
            differ = sum(p != q for p, q in zip(x[-1], y[-1], strict=True))
            similarity = 1.0 if x[0] == y[0] else max(0.0, 1.0 - 2.0 * differ / len(x[-1]))
            if similarity >= 0.7:
                expected[(a, b)] = similarity
    check_against(index, database_dsn, expected, stored)
