"""Every Manku table of every design is queried: each has a neighbour that only it can find.

For a query ``q`` and a table whose prefix is the blocks ``P`` (the other ``k`` blocks are
``R``), the fingerprint ``q`` with one bit flipped in each block of ``R`` is exactly ``k`` bits
away and agrees with ``q`` on ``P`` only: every other table's prefix holds a block of ``R``.
So a table left out of a query (or given the wrong permutation or prefix) loses its neighbour,
whichever design, and the brute-force comparison fails.
"""

from __future__ import annotations

import itertools
import random

import psycopg
import pytest

from simindex.core.bits import hamming_distance, to_signed
from simindex.core.design import MankuDesign, MankuTable
from simindex.core.spec import SimHash
from simindex.index import Index, create_index
from simindex.ops.pairs import NearPair
from tests.integration.test_simhash_index import load_synthetic

DESIGNS = [
    (0, 1),
    (1, 2),
    (1, 3),
    (2, 3),
    (2, 4),
    (2, 11),  # 55 tables
    (3, 4),
    (3, 5),
    (3, 6),  # 20 tables
    (3, 7),
    (4, 5),
    (4, 6),
    (5, 7),  # 21 tables
    (5, 8),  # 56 tables
    (6, 8),
]


def block_start(table: MankuTable, block: int) -> int:
    """The lowest bit of ``block`` in the unpermuted fingerprint (block 0 is the top one)."""
    return 64 - sum(table.widths[: block + 1])


def only_this_table(rng: random.Random, design: MankuDesign, position: int, query: int) -> int:
    """``query`` with one bit flipped in each block outside table ``position``'s prefix."""
    table = design.tables[position]
    value = query
    for block in table.order[table.prefix_blocks :]:
        value ^= 1 << (block_start(table, block) + rng.randrange(table.widths[block]))
    return value


def finders(design: MankuDesign, query: int, value: int) -> list[int]:
    """The tables whose prefix range for ``query`` holds ``value``."""
    return [
        position
        for position, table in enumerate(design.tables)
        if table.prefix_range(query)[0] <= table.permute(value) <= table.prefix_range(query)[1]
    ]


QUERIES = 3  # one random, one with the top bit set, one with it clear
FAMILY = 1000  # keys: query j at j * FAMILY, its neighbours after it


def planted(design: MankuDesign, seed: int) -> dict[int, int]:
    """Per query: the query itself, one neighbour per table, and a decoy one bit too far."""
    rng = random.Random(seed)
    values: dict[int, int] = {}
    for family in range(QUERIES):
        query = rng.getrandbits(64)
        if family == 1:
            query |= 1 << 63
        elif family == 2:
            query &= ~(1 << 63)
        values[family * FAMILY] = query
        for position in range(design.table_count):
            neighbour = only_this_table(rng, design, position, query)
            assert hamming_distance(neighbour, query) == design.max_distance
            assert finders(design, query, neighbour) == (
                [position] if design.max_distance else list(range(design.table_count))
            )
            values[family * FAMILY + 1 + position] = neighbour
        prefix = design.tables[0].prefix_mask
        free = [bit for bit in range(64) if not prefix >> bit & 1]
        decoy = values[family * FAMILY + 1]
        for bit in free:
            if hamming_distance(decoy ^ (1 << bit), query) == design.max_distance + 1:
                values[family * FAMILY + FAMILY - 1] = decoy ^ (1 << bit)
                break
    return values


def brute_near(values: dict[int, int], query: int, limit: int) -> list[tuple[int, int]]:
    return sorted(
        (hamming_distance(value, query), key)
        for key, value in values.items()
        if hamming_distance(value, query) <= limit
    )


def brute_pairs(values: dict[int, int], limit: int) -> set[tuple[int, int, int]]:
    return {
        (a, b, hamming_distance(x, y))
        for (a, x), (b, y) in itertools.combinations(sorted(values.items()), 2)
        if hamming_distance(x, y) <= limit
    }


@pytest.fixture(params=DESIGNS, ids=[f"k{k}-blocks{n}" for k, n in DESIGNS])
def loaded(request: pytest.FixtureRequest, database_dsn: str) -> tuple[Index, dict[int, int]]:
    max_distance, num_blocks = request.param
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE fp (id bigint PRIMARY KEY, body text)")
    method = SimHash(max_distance=max_distance, num_blocks=num_blocks)
    index = create_index(database_dsn, "fp", "fp", "body", method=method)
    values = planted(MankuDesign(max_distance, num_blocks), seed=max_distance * 100 + num_blocks)
    load_synthetic(database_dsn, index, list(values.values()), keys=list(values))
    return index, values


def test_near_finds_each_tables_own_neighbour(
    loaded: tuple[Index, dict[int, int]], database_dsn: str
) -> None:
    index, values = loaded
    k = index.info().spec.design.max_distance  # type: ignore[union-attr]
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        for family in range(QUERIES):
            key = family * FAMILY
            query = values[key]
            expected = brute_near(values, query, k)
            assert len(expected) >= index.info().spec.design.table_count + 1  # type: ignore[union-attr]
            by_python = [(m.distance, m.key) for m in index.near(fingerprint=to_signed(query))]
            assert by_python == expected
            by_sql = conn.execute(
                "SELECT distance, key FROM simindex.fp_near_v1(%s)", (to_signed(query),)
            ).fetchall()
            assert by_sql == expected
            others = [(distance, other) for distance, other in expected if other != key]
            assert [(m.distance, m.key) for m in index.near_key(key)] == others
            by_key = conn.execute(
                "SELECT distance, key FROM simindex.fp_near_key_v1(%s) ORDER BY 1, 2", (key,)
            ).fetchall()
            assert by_key == others
            by_name = conn.execute(
                "SELECT distance, key FROM simindex.near_key_v1('fp', %s::bigint) ORDER BY 1, 2",
                (key,),
            ).fetchall()
            assert by_name == others


def test_pairs_finds_each_tables_own_pairs(
    loaded: tuple[Index, dict[int, int]], database_dsn: str
) -> None:
    index, values = loaded
    k = index.info().spec.design.max_distance  # type: ignore[union-attr]
    expected = brute_pairs(values, k)
    everything = list(index.pairs())
    found = [pair for pair in everything if isinstance(pair, NearPair)]
    assert found == everything
    as_set = {(p.left, p.right, p.distance) for p in found}
    assert len(as_set) == len(found), "a pair came twice"
    assert as_set == expected
    with psycopg.connect(database_dsn) as conn:
        rows = conn.execute("SELECT left_key, right_key, distance FROM simindex.fp_pairs_v1()")
        from_sql = [tuple(row) for row in rows]
    assert len(from_sql) == len(expected) and set(from_sql) == expected
