"""All pairs: exactly the brute-force answer, each pair once, from Python and from SQL."""

from __future__ import annotations

import itertools
import random
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql

from simindex.core.bits import hamming_distance, to_signed
from simindex.core.spec import MinHash, SimHash
from simindex.db.catalog import store_of
from simindex.db.minhash_store import MinHashStore
from simindex.db.simhash_store import SimHashStore
from simindex.index import Index, create_index
from simindex.ops.pairs import NearPair, SimilarPair

WORDS = [f"w{i}" for i in range(500)]


def _flip(rng: random.Random, value: int, bits: int) -> int:
    for bit in rng.sample(range(64), bits):
        value ^= 1 << bit
    return value


def planted_fingerprints(count: int, seed: int = 3) -> dict[int, int]:
    """Families of fingerprints a few bits apart (top bit set in some), plus exact copies."""
    rng = random.Random(seed)
    values: dict[int, int] = {}
    key = 0
    while len(values) < count:
        base = rng.getrandbits(64)
        for _ in range(rng.randint(1, 5)):
            key += 1
            values[key] = _flip(rng, base, rng.choice([0, 0, 1, 2, 3, 4, 5]))
    return values


@pytest.fixture
def simhash_index(database_dsn: str) -> tuple[Index, dict[int, int]]:
    values = planted_fingerprints(1500)
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE documents (id bigint PRIMARY KEY, body text)")
    index = create_index(database_dsn, "docs", "documents", "body", method=SimHash(max_distance=3))
    index.build()
    info = index.info()
    store = SimHashStore(index.index_schema, "docs", info.source.key_type, info.spec.design)  # type: ignore[arg-type]
    with psycopg.connect(database_dsn) as conn:
        # Rows of the source too: answers name only keys the table holds.
        conn.execute("INSERT INTO documents (id) SELECT unnest(%s::bigint[])", (list(values),))
        store.upsert(conn, list(values), np.array(list(values.values()), dtype=np.uint64))
    return index, values


def brute_force(values: dict[int, int], max_distance: int) -> dict[tuple[int, int], int]:
    found = {}
    for (a, x), (b, y) in itertools.combinations(sorted(values.items()), 2):
        distance = hamming_distance(x, y)
        if distance <= max_distance:
            found[(a, b)] = distance
    return found


@pytest.mark.parametrize("max_distance", [3, 1, 0])
def test_simhash_pairs_equal_brute_force(
    simhash_index: tuple[Index, dict[int, int]], max_distance: int
) -> None:
    index, values = simhash_index
    everything = list(index.pairs(max_distance=max_distance))
    found = [pair for pair in everything if isinstance(pair, NearPair)]
    assert found == everything and all(pair.left < pair.right for pair in found)
    as_dict = {(p.left, p.right): p.distance for p in found}
    assert len(as_dict) == len(found), "a pair came twice"
    expected = brute_force(values, max_distance)
    assert as_dict == expected
    assert len(expected) > 100


def test_simhash_pairs_from_sql_and_progress(
    simhash_index: tuple[Index, dict[int, int]], database_dsn: str
) -> None:
    index, values = simhash_index
    seen: list[tuple[int, int]] = []
    from_python = sorted(
        (p.left, p.right, p.distance)
        for p in index.pairs(progress=lambda done, total: seen.append((done, total)))
        if isinstance(p, NearPair)
    )
    tables = len(seen)
    assert seen == [(done, tables) for done in range(1, tables + 1)] and tables > 1
    with psycopg.connect(database_dsn) as conn:
        rows = conn.execute(
            "SELECT left_key, right_key, distance FROM simindex.docs_pairs_v1() ORDER BY 1, 2"
        ).fetchall()
        assert sorted(map(tuple, rows)) == from_python
        two = conn.execute("SELECT count(*) FROM simindex.docs_pairs_v1(2)").fetchone()
        assert two == (len(brute_force(values, 2)),)
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="from 0 to 3, got 4"):
            conn.execute("SELECT * FROM simindex.docs_pairs_v1(4)")


def test_simhash_pairs_argument_errors(simhash_index: tuple[Index, dict[int, int]]) -> None:
    index, _ = simhash_index
    with pytest.raises(ValueError, match="from 0 to the index's 3"):
        list(index.pairs(max_distance=4))
    with pytest.raises(TypeError, match="SimHash index: give max_distance"):
        list(index.pairs(threshold=0.5))


def test_top_bit_fingerprints_pair_across_the_sign_boundary(
    simhash_index: tuple[Index, dict[int, int]], database_dsn: str
) -> None:
    index, _ = simhash_index
    high = (1 << 63) | 0x5555
    low = high ^ (1 << 63) ^ 1
    assert to_signed(low) < 0 <= to_signed(high)
    info = index.info()
    store = SimHashStore(index.index_schema, "docs", info.source.key_type, info.spec.design)  # type: ignore[arg-type]
    with psycopg.connect(database_dsn) as conn:
        conn.execute("INSERT INTO documents (id) VALUES (900001), (900002)")
        store.upsert(conn, [900001, 900002], np.array([high, low], np.uint64))
    found = {(p.left, p.right) for p in index.pairs(max_distance=2)}
    assert (900001, 900002) in found


def planted_texts(count: int, seed: int = 5) -> list[str]:
    rng = random.Random(seed)
    texts: list[str] = []
    while len(texts) < count:
        base = [rng.choice(WORDS) for _ in range(40)]
        texts.append(" ".join(base))
        for _ in range(rng.randint(0, 3)):
            copy = list(base)
            for _ in range(rng.randint(0, 4)):
                copy[rng.randrange(len(copy))] = rng.choice(WORDS)
            texts.append(" ".join(copy))
    return texts


def test_minhash_pairs_equal_band_sharing_brute_force(database_dsn: str) -> None:
    texts = planted_texts(600)
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE notes (id text PRIMARY KEY, body text)")
        with conn.cursor().copy("COPY notes (id, body) FROM STDIN") as copy:
            for number, text in enumerate(texts):
                copy.write_row((f"n{number:04}", text))
    index = create_index(
        database_dsn, "notes", "notes", "body", method=MinHash(threshold=0.5, num_perm=64)
    )
    index.build()
    info = index.info()
    assert isinstance(info.spec.method, MinHash)
    store = store_of(info)
    assert isinstance(store, MinHashStore)
    columns = ", ".join(f"b{band}" for band in range(store.design.num_bands))
    with psycopg.connect(database_dsn) as conn:
        stored = {
            key: (set_hash, bands, sketch)
            for key, set_hash, bands, sketch in conn.execute(
                sql.SQL("SELECT key, set_hash, ARRAY[{}], sketch::text FROM {}").format(
                    sql.SQL(columns), store.table()
                )
            )
        }
    expected: dict[tuple[str, str], float] = {}
    for (a, x), (b, y) in itertools.combinations(sorted(stored.items()), 2):
        shares_band = any(p == q for p, q in zip(x[1], y[1], strict=True))
        differ = sum(p != q for p, q in zip(x[2], y[2], strict=True))
        similarity = 1.0 if x[0] == y[0] else max(0.0, 1.0 - 2.0 * differ / len(x[2]))
        if shares_band and similarity >= 0.6:
            expected[(a, b)] = similarity
    everything = list(index.pairs(threshold=0.6, verify="estimate"))
    found = [pair for pair in everything if isinstance(pair, SimilarPair)]
    assert found == everything
    as_dict: dict[tuple[Any, Any], float] = {(p.left, p.right): p.similarity for p in found}
    assert len(as_dict) == len(found), "a pair came twice"
    assert as_dict == pytest.approx(expected)
    assert len(expected) > 50
    with pytest.raises(TypeError, match="MinHash index: give threshold"):
        list(index.pairs(max_distance=1))
    with psycopg.connect(database_dsn) as conn:
        count = conn.execute("SELECT count(*) FROM simindex.notes_pairs_v1(0.6)").fetchone()
    assert count == (len(expected),)
