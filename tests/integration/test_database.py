"""The test-database fixtures, and simindex.core.bits' 64-bit mapping checked against PostgreSQL."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from psycopg.rows import TupleRow

from simindex.core.bits import (
    MAX_UNSIGNED,
    hamming_distance,
    hamming_distances,
    to_signed,
    to_unsigned,
    to_unsigned_array,
)

Connection = psycopg.Connection[TupleRow]

TOP_BIT = 1 << 63
# Where a wrong mapping shows: both ends, and both sides of the top bit.
EDGES = [0, 1, TOP_BIT - 1, TOP_BIT, TOP_BIT + 1, MAX_UNSIGNED - 1, MAX_UNSIGNED]
uint64s = st.one_of(
    st.integers(0, MAX_UNSIGNED),
    st.sampled_from(EDGES),
    st.integers(TOP_BIT - 1000, TOP_BIT + 1000),
)
# One connection serves every example of a test; each example rolls back what it made.
on_one_connection = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def test_server_is_a_supported_version(conn: Connection) -> None:
    row = conn.execute("SELECT current_setting('server_version_num')::int").fetchone()
    assert row is not None
    assert row[0] == conn.info.server_version
    assert conn.info.server_version >= 140000


def test_database_is_utf8(conn: Connection) -> None:
    row = conn.execute(
        "SELECT pg_encoding_to_char(encoding) FROM pg_database WHERE datname = current_database()"
    ).fetchone()
    assert row == ("UTF8",)


@pytest.mark.parametrize("attempt", [1, 2])
def test_each_test_gets_a_fresh_database(conn: Connection, attempt: int) -> None:
    # Both attempts commit a table; whichever runs second finds it if databases are shared.
    row = conn.execute("SELECT current_database(), to_regclass('leak_check')").fetchone()
    assert row is not None
    database, leaked = row
    assert database.startswith("test_")
    assert leaked is None
    conn.execute("CREATE TABLE leak_check (attempt int)")
    conn.execute("INSERT INTO leak_check VALUES (%s)", (attempt,))
    conn.commit()


def test_database_dsn_reaches_the_test_database(database_dsn: str, conn: Connection) -> None:
    conn.execute("CREATE TABLE seen_from_the_dsn ()")
    conn.commit()
    with psycopg.connect(database_dsn) as other:
        row = other.execute("SELECT to_regclass('seen_from_the_dsn') IS NOT NULL").fetchone()
    assert row == (True,)
    assert conn.autocommit is False


def _load(conn: Connection, values: list[int]) -> None:
    """Store ``values`` as bigints in a temporary table, in a transaction the caller rolls back."""
    conn.execute(
        "CREATE TEMP TABLE fingerprints (i int PRIMARY KEY, v bigint NOT NULL) ON COMMIT DROP"
    )
    with conn.cursor().copy("COPY fingerprints (i, v) FROM STDIN") as copy:
        for i, value in enumerate(values):
            copy.write_row((i, to_signed(value)))


@on_one_connection
@given(values=st.lists(uint64s, min_size=1, max_size=300))
@example(values=EDGES[::-1])
def test_order_by_stored_bigint_is_unsigned_order(conn: Connection, values: list[int]) -> None:
    try:
        _load(conn, values)
        stored = [v for (v,) in conn.execute("SELECT v FROM fingerprints ORDER BY v")]
    finally:
        conn.rollback()
    assert [to_unsigned(v) for v in stored] == sorted(values)
    assert to_unsigned_array(np.array(stored, dtype=np.int64)).tolist() == sorted(values)


@st.composite
def unsigned_ranges(draw: st.DrawFn) -> tuple[int, int]:
    a, b = draw(uint64s), draw(uint64s)
    return min(a, b), max(a, b)


ranges_across_the_top_bit = st.tuples(
    st.integers(0, TOP_BIT - 1), st.integers(TOP_BIT, MAX_UNSIGNED)
)


@on_one_connection
@given(
    values=st.lists(uint64s, max_size=300),
    bounds=st.one_of(unsigned_ranges(), ranges_across_the_top_bit),
)
@example(values=EDGES, bounds=(TOP_BIT - 1, TOP_BIT))
@example(values=EDGES, bounds=(0, MAX_UNSIGNED))
def test_between_on_stored_bigints_is_the_unsigned_range(
    conn: Connection, values: list[int], bounds: tuple[int, int]
) -> None:
    low, high = bounds
    # The bounds and their neighbours pin down that both ends are inclusive.
    values = values + [v for v in (low - 1, low, high, high + 1) if 0 <= v <= MAX_UNSIGNED]
    try:
        _load(conn, values)
        # The real queries are btree range scans, so make this one a range scan too.
        conn.execute("CREATE INDEX ON fingerprints (v)")
        conn.execute("SET LOCAL enable_seqscan = off")
        found = conn.execute(
            "SELECT v FROM fingerprints WHERE v BETWEEN %s AND %s ORDER BY v",
            (to_signed(low), to_signed(high)),
        ).fetchall()
    finally:
        conn.rollback()
    assert [to_unsigned(v) for (v,) in found] == sorted(v for v in values if low <= v <= high)


@on_one_connection
@given(
    values=st.lists(uint64s, min_size=1, max_size=300),
    query=uint64s,
    max_distance=st.integers(0, 64),
)
@example(values=[MAX_UNSIGNED, 0, TOP_BIT], query=0, max_distance=1)
def test_hamming_distance_in_sql_is_hamming_of_the_unsigned_values(
    conn: Connection, values: list[int], query: int, max_distance: int
) -> None:
    # bit_count has no bigint variant (PostgreSQL 14+ has it for bit and bytea): cast first.
    distance = "bit_count((v # %(query)s::bigint)::bit(64))"
    params = {"query": to_signed(query), "max_distance": max_distance}
    try:
        _load(conn, values)
        distances = [
            d for (d,) in conn.execute(f"SELECT {distance} FROM fingerprints ORDER BY i", params)
        ]
        near = [
            i
            for (i,) in conn.execute(
                f"SELECT i FROM fingerprints WHERE {distance} <= %(max_distance)s ORDER BY i",
                params,
            )
        ]
    finally:
        conn.rollback()
    assert distances == [hamming_distance(v, query) for v in values]
    assert distances == hamming_distances(np.array(values, dtype=np.uint64), query).tolist()
    assert near == [i for i, d in enumerate(distances) if d <= max_distance]
