"""Clusters: the brute-force components, stable ids, bottom-k keys and survivors."""

from __future__ import annotations

import itertools
import random
import uuid
from collections import defaultdict
from typing import Any

import numpy as np
import psycopg
import pytest

from simindex import errors, sync
from simindex.core.bits import hamming_distance
from simindex.core.design import LshDesign
from simindex.core.minhash import bottom_k_key
from simindex.core.spec import MinHash, SimHash, resolve
from simindex.db.simhash_store import SimHashStore
from simindex.index import Index, create_index
from simindex.ops.pairs import IdenticalGroup
from tests.integration.test_pairs import planted_fingerprints, planted_texts


def components(keys: list[Any], pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
    """Brute force: each key's smallest connected key."""
    parent = {key: key for key in keys}

    def root(key: Any) -> Any:
        while parent[key] != key:
            key = parent[key]
        return key

    for a, b in pairs:
        first, second = sorted((root(a), root(b)))
        parent[second] = first
    return {key: root(key) for key in keys}


def write_fingerprints(index: Index, dsn: str, values: dict[int, int]) -> None:
    info = index.info()
    store = SimHashStore(index.index_schema, index.name, info.source.key_type, info.spec.design)  # type: ignore[arg-type]
    with psycopg.connect(dsn) as conn:
        # Rows of the source too: answers name only keys the table holds.
        conn.execute(
            "INSERT INTO documents (id) SELECT unnest(%s::bigint[]) ON CONFLICT DO NOTHING",
            (list(values),),
        )
        store.upsert(conn, list(values), np.array(list(values.values()), dtype=np.uint64))


def stored_clusters(dsn: str, name: str) -> dict[Any, Any]:
    with psycopg.connect(dsn) as conn:
        return dict(conn.execute(f"SELECT key, cluster_id FROM simindex.{name}_clusters"))


@pytest.fixture
def simhash_index(database_dsn: str) -> Index:
    with psycopg.connect(database_dsn) as conn:
        conn.execute(
            "CREATE TABLE documents (id bigint PRIMARY KEY, body text, updated_at integer)"
        )
    index = create_index(database_dsn, "docs", "documents", "body", method=SimHash(max_distance=3))
    index.build()
    return index


def test_simhash_clusters_are_the_components_of_all_pairs(
    simhash_index: Index, database_dsn: str
) -> None:
    values = planted_fingerprints(1200)
    rng = random.Random(11)
    # A chain: each link 2 bits from the one before, the ends far apart.
    chain = rng.getrandbits(64)
    for key in range(50_001, 50_041):
        values[key] = chain
        chain ^= (1 << rng.randrange(64)) | (1 << rng.randrange(64))
    write_fingerprints(simhash_index, database_dsn, values)
    steps: list[str] = []
    report = simhash_index.clusters(progress=lambda step, done, total: steps.append(step))
    expected = components(
        sorted(values),
        [
            (a, b)
            for (a, x), (b, y) in itertools.combinations(sorted(values.items()), 2)
            if hamming_distance(x, y) <= 3
        ],
    )
    assert stored_clusters(database_dsn, "docs") == expected
    assert expected[50_040] == 50_001
    assert (report.method, report.rows) == ("pairs", len(values))
    assert report.clusters == len(set(expected.values()))
    sizes: dict[int, int] = defaultdict(int)
    for cluster_id in expected.values():
        sizes[cluster_id] += 1
    assert report.largest == max(sizes.values()) >= 40
    assert report.duplicate_rows == sum(size for size in sizes.values() if size > 1)
    assert {"pairs", "components", "rows"} <= set(steps) and report.rounds >= 2

    members = list(simhash_index.cluster_members(min_size=2))
    assert {m.key for m in members} == {k for k, c in expected.items() if sizes[c] > 1}
    assert members[0].size == report.largest
    assert all(m.cluster_id == expected[m.key] for m in members)


def test_an_unrelated_new_row_changes_no_cluster_id(
    simhash_index: Index, database_dsn: str
) -> None:
    values = planted_fingerprints(500, seed=8)
    write_fingerprints(simhash_index, database_dsn, values)
    simhash_index.clusters()
    before = stored_clusters(database_dsn, "docs")
    rng = random.Random(99)  # seeded once: each call draws a new value
    far = next(
        candidate
        for candidate in iter(lambda: rng.getrandbits(64), None)
        if all(hamming_distance(candidate, v) > 3 for v in values.values())
    )
    write_fingerprints(simhash_index, database_dsn, {0: far})
    simhash_index.clusters()
    after = stored_clusters(database_dsn, "docs")
    assert after.pop(0) == 0
    assert after == before


def test_survivors_by_rule_and_the_sql_delete(simhash_index: Index, database_dsn: str) -> None:
    with pytest.raises(errors.IndexNotReadyError, match="no clusters yet"):
        list(simhash_index.survivors("pairs"))
    base = "the quick brown fox jumps over the lazy dog and runs far away into the woods " * 3
    rows = [
        (1, base, 30),
        (2, base + "again", 10),
        (3, base + "again and again", 20),
        (4, "a completely different text about databases and their many indexes", 5),
    ]
    with psycopg.connect(database_dsn) as conn:
        conn.cursor().executemany("INSERT INTO documents VALUES (%s, %s, %s)", rows)
    simhash_index.build()
    simhash_index.clusters()
    kept = {
        prefer: {s.key for s in simhash_index.survivors("pairs", prefer=prefer) if s.survivor}
        for prefer in (
            "smallest_key",
            "largest_key",
            "longest_text",
            "shortest_text",
            "newest:updated_at",
            "oldest:updated_at",
        )
    }
    assert kept == {
        "smallest_key": {1},
        "largest_key": {3},
        "longest_text": {3},
        "shortest_text": {1},
        "newest:updated_at": {1},
        "oldest:updated_at": {2},
    }
    everyone = list(simhash_index.survivors("pairs"))
    assert sorted(s.key for s in everyone) == [1, 2, 3]
    assert all(s.cluster_id == 1 and s.cluster_size == 3 for s in everyone)
    with pytest.raises(ValueError, match="prefer must be"):
        list(simhash_index.survivors("pairs", prefer="best"))
    with pytest.raises(ValueError, match="prefer 'newest:nothing' names no column of"):
        list(simhash_index.survivors("pairs", prefer="newest:nothing"))
    with psycopg.connect(database_dsn) as conn:
        conn.execute(
            "DELETE FROM documents AS d "
            "USING simindex.docs_survivors_v1('pairs', 'longest_text') AS s "
            "WHERE d.id = s.key AND NOT s.survivor"
        )
        left = [row[0] for row in conn.execute("SELECT id FROM documents ORDER BY id")]
    assert left == [3, 4]


def band_sharing_pairs(
    keys: list[Any], signatures: np.ndarray[Any, Any], design: LshDesign, threshold: float
) -> list[tuple[Any, Any]]:
    """Brute force: pairs that share a whole band (the same values, compared as values, not
    as band hashes) and whose stored rows (simindex.core.packing) estimate at least
    ``threshold``: 1 for the same set hash, else ``1 - 2 d / bits`` from their sketches."""
    num_perm = design.num_perm
    sketches = signatures[:, 128:-1]  # the default num_perm: 128 values, then the sketch
    bits = 64 * sketches.shape[1]

    def estimate(a: int, b: int) -> float:
        if signatures[a, -1] == signatures[b, -1]:
            return 1.0
        differ = int(np.bitwise_count(sketches[a] ^ sketches[b]).sum())
        return float(max(0.0, 1.0 - 2.0 * differ / bits))

    width = design.rows_per_band
    sharing: set[tuple[int, int]] = set()
    for band in range(design.num_bands):
        groups: dict[tuple[int, ...], list[int]] = defaultdict(list)
        for row, signature in enumerate(
            signatures[:, :num_perm][:, band * width : (band + 1) * width]
        ):
            groups[tuple(signature.tolist())].append(row)
        for rows in groups.values():
            sharing.update(itertools.combinations(rows, 2))
    return [(keys[a], keys[b]) for a, b in sorted(sharing) if estimate(a, b) >= threshold]


def test_minhash_clusters_are_the_components_of_brute_force_pairs(database_dsn: str) -> None:
    texts = planted_texts(400, seed=21)
    keys = [str(uuid.UUID(int=random.Random(n).getrandbits(128))) for n in range(len(texts))]
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE notes (id uuid PRIMARY KEY, body text)")
        conn.cursor().executemany(
            "INSERT INTO notes VALUES (%s, %s)", list(zip(keys, texts, strict=True))
        )
    method = MinHash(threshold=0.6)
    index = create_index(database_dsn, "notes", "notes", "body", method=method)
    index.build()
    spec = resolve(method)
    assert isinstance(spec.design, LshDesign)
    signatures, _ = spec.minhash_values(texts)
    pairs = band_sharing_pairs(keys, signatures, spec.design, 0.6)
    report = index.clusters(verify="estimate")
    found = {
        str(key): str(cluster) for key, cluster in stored_clusters(database_dsn, "notes").items()
    }
    assert found == components(sorted(keys), pairs)
    assert len(pairs) > 20
    # The graph's edges join distinct signatures only: identical rows are one node.
    node_pairs = [p for p in index.pairs(groups=True) if not isinstance(p, IdenticalGroup)]
    assert report.pairs == len(node_pairs) < len(pairs)
    assert report.duplicate_rows > 0
    # Verified exactly (the default), the clusters are the components of the exact pairs.
    exact = [(str(p.left), str(p.right)) for p in index.pairs(verify="exact")]
    report = index.clusters()
    found = {
        str(key): str(cluster) for key, cluster in stored_clusters(database_dsn, "notes").items()
    }
    assert found == components(sorted(keys), exact)
    # Rows of equal texts join their class's first row, and classes join once: fewer edges.
    assert len(exact) > 20
    assert 0 < report.pairs < len(exact)


def test_bottom_k_clusters_group_equal_keys(simhash_index: Index, database_dsn: str) -> None:
    texts = [*planted_texts(300, seed=4), "", "   "]
    with psycopg.connect(database_dsn) as conn:
        conn.cursor().executemany(
            "INSERT INTO documents (id, body) VALUES (%s, %s)",
            [(n, t) for n, t in enumerate(texts, 1)] + [(len(texts) + 1, None)],
        )
    simhash_index.build()
    with pytest.raises(ValueError, match="bottom_k must be a positive int"):
        simhash_index.clusters(method="bottom_k", bottom_k=0)
    report = simhash_index.clusters(method="bottom_k", bottom_k=2)
    shingling = simhash_index.info().spec.method.shingling
    by_key: dict[int, list[int]] = defaultdict(list)
    for number, text in enumerate(texts, 1):
        value = bottom_k_key(shingling.hashes(text), 2)
        if value is not None:
            by_key[value].append(number)
    expected = {n: min(group) for group in by_key.values() for n in group}
    assert stored_clusters(database_dsn, "docs") == expected
    assert report.rows == len(texts) - 2 and report.clusters == len(by_key) < len(texts) - 2
    with pytest.raises(TypeError, match="no max_distance"):
        simhash_index.clusters(method="bottom_k", max_distance=2)
    with pytest.raises(ValueError, match="method must be"):
        simhash_index.clusters(method="kmeans")  # type: ignore[arg-type]


def test_drop_removes_the_cluster_objects(simhash_index: Index, database_dsn: str) -> None:
    simhash_index.clusters()
    simhash_index.drop()
    with psycopg.connect(database_dsn) as conn:
        left = conn.execute(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'simindex' AND c.relname LIKE 'docs%'"
        ).fetchone()
        functions = conn.execute(
            "SELECT count(*) FROM pg_proc WHERE proname LIKE 'docs%'"
        ).fetchone()
    assert left == (0,) and functions == (0,)


def leader_oracle(values: dict[int, int], max_distance: int) -> dict[int, int]:
    """Sequential leader clustering in key order: join the nearest earlier row's cluster."""
    cluster: dict[int, int] = {}
    for key in sorted(values):
        earlier = [
            (hamming_distance(values[key], values[other]), other)
            for other in cluster
            if hamming_distance(values[key], values[other]) <= max_distance
        ]
        cluster[key] = cluster[min(earlier)[1]] if earlier else key
    return cluster


def test_leader_clusters_follow_the_nearest_earlier_row(
    simhash_index: Index, database_dsn: str
) -> None:
    values = planted_fingerprints(800, seed=17)
    write_fingerprints(simhash_index, database_dsn, values)
    with pytest.raises(TypeError, match="index's own max_distance"):
        simhash_index.clusters(method="leader", max_distance=2)
    report = simhash_index.clusters(method="leader")
    assert report.method == "leader"
    assert stored_clusters(database_dsn, "docs") == leader_oracle(values, 3)
    with psycopg.connect(database_dsn) as conn:
        assert conn.execute(
            "SELECT clustering FROM simindex.indexes WHERE name = 'docs'"
        ).fetchone() == ("leader",)


def test_sync_keeps_leader_clusters(simhash_index: Index, database_dsn: str) -> None:
    texts = planted_texts(200, seed=31)
    with psycopg.connect(database_dsn) as conn:
        conn.cursor().executemany(
            "INSERT INTO documents (id, body) VALUES (%s, %s)", list(enumerate(texts, 1))
        )
    simhash_index.build()
    simhash_index.clusters(method="leader")
    before = stored_clusters(database_dsn, "docs")
    target = texts[9]  # an exact copy: distance 0 to row 10
    assert {m.key for m in simhash_index.near(target)} >= {10}
    with psycopg.connect(database_dsn) as conn:
        conn.execute(
            "INSERT INTO documents (id, body) VALUES (1001, %s), (1002, %s)",
            (target, "nothing like any other text here at all, quite unique words"),
        )
    sync(database_dsn)
    after = stored_clusters(database_dsn, "docs")
    assert after[1001] == before[10]
    assert after[1002] == 1002
    assert {k: after[k] for k in before} == before

    with psycopg.connect(database_dsn) as conn:
        conn.execute("UPDATE documents SET body = 'a fresh text with new words' WHERE id = 1001")
        conn.execute("UPDATE documents SET body = NULL WHERE id = 1002")
    sync(database_dsn)
    after = stored_clusters(database_dsn, "docs")
    assert after[1001] == 1001 and 1002 not in after

    simhash_index.clusters()  # another method: sync stops maintaining the clusters
    with psycopg.connect(database_dsn) as conn:
        conn.execute("INSERT INTO documents (id, body) VALUES (1003, %s)", (target,))
    sync(database_dsn)
    assert 1003 not in stored_clusters(database_dsn, "docs")


def test_sync_keeps_minhash_leader_clusters(database_dsn: str) -> None:
    texts = planted_texts(120, seed=41)
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE notes (id integer PRIMARY KEY, body text)")
        conn.cursor().executemany("INSERT INTO notes VALUES (%s, %s)", list(enumerate(texts, 1)))
    index = create_index(database_dsn, "notes", "notes", "body", method=MinHash(threshold=0.6))
    index.build()
    index.clusters(method="leader")
    before = stored_clusters(database_dsn, "notes")
    with psycopg.connect(database_dsn) as conn:
        conn.execute(
            "INSERT INTO notes VALUES (1001, %s), (1002, 'words found in no other note at all')",
            (texts[4],),
        )
    sync(database_dsn)
    after = stored_clusters(database_dsn, "notes")
    assert (after[1001], after[1002]) == (before[5], 1002)
    assert {key: after[key] for key in before} == before


def test_survivors_name_the_clustering_they_use(simhash_index: Index, database_dsn: str) -> None:
    base = "the quick brown fox jumps over the lazy dog and runs far away into the woods " * 3
    with psycopg.connect(database_dsn) as conn:
        conn.cursor().executemany(
            "INSERT INTO documents VALUES (%s, %s, %s)",
            [(1, base, 1), (2, base + "again", 2), (3, "another text about other things", 3)],
        )
    simhash_index.build()
    simhash_index.clusters(method="bottom_k")
    assert {s.key for s in simhash_index.survivors("bottom_k")} <= {1, 2}
    refused = "of its last clusters run, method bottom_k, not pairs"
    with pytest.raises(ValueError, match=refused):
        list(simhash_index.survivors("pairs"))
    with psycopg.connect(database_dsn) as conn, pytest.raises(psycopg.Error, match=refused):
        conn.execute("SELECT * FROM simindex.docs_survivors_v1('pairs')")
    simhash_index.clusters()
    assert [s.key for s in simhash_index.survivors("pairs")] == [1, 2]
    with pytest.raises(ValueError, match="method must be pairs, leader, bottom_k"):
        list(simhash_index.survivors("nearest"))  # type: ignore[arg-type]
