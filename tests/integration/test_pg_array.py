"""simindex.db.pg_array: numpy arrays arrive in PostgreSQL as the same bigint[] values."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.rows import TupleRow

from simindex.db.pg_array import BigintArray, register

Connection = psycopg.Connection[TupleRow]
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
int64_lists = st.lists(
    st.one_of(st.integers(INT64_MIN, INT64_MAX), st.sampled_from([INT64_MIN, -1, 0, 1, INT64_MAX])),
    max_size=300,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(values=int64_lists)
def test_values_arrive_unchanged(conn: Connection, values: list[int]) -> None:
    register(conn)
    row = conn.execute(
        "SELECT %b::bigint[], cardinality(%b::bigint[])",
        [BigintArray(np.array(values, dtype=np.int64))] * 2,
    ).fetchone()
    assert row is not None
    assert row[0] == values
    assert row[1] == len(values)


def test_a_two_dimensional_array_is_sent_flat_in_row_order(conn: Connection) -> None:
    register(conn)
    grid = np.arange(12, dtype=np.int64).reshape(3, 4)
    row = conn.execute("SELECT %b::bigint[]", [BigintArray(grid)]).fetchone()
    assert row == (list(range(12)),)


def test_the_empty_array_is_postgresqls_own_empty_array(conn: Connection) -> None:
    register(conn)
    row = conn.execute(
        "SELECT %b::bigint[] = '{}'::bigint[], array_ndims(%b::bigint[])",
        [BigintArray(np.array([], dtype=np.int64))] * 2,
    ).fetchone()
    assert row == (True, None)


def test_it_casts_to_narrower_integer_arrays_and_checks_their_range(conn: Connection) -> None:
    register(conn)
    row = conn.execute("SELECT %b::integer[]", [BigintArray([1, -2, 3])]).fetchone()
    assert row == ([1, -2, 3],)
    with pytest.raises(psycopg.errors.NumericValueOutOfRange):
        conn.execute("SELECT %b::integer[]", [BigintArray([2**40])])


def test_values_that_are_not_64_bit_integers_are_refused() -> None:
    with pytest.raises(OverflowError):
        BigintArray([2**64])


def test_registering_twice_is_harmless_and_connections_need_it(database_dsn: str) -> None:
    with (
        psycopg.connect(database_dsn) as conn,
        pytest.raises(psycopg.ProgrammingError, match="BigintArray"),
    ):
        conn.execute("SELECT %b::bigint[]", [BigintArray([1])])
    with psycopg.connect(database_dsn) as conn:
        register(conn)
        register(conn)
        row = conn.execute("SELECT %b::bigint[]", [BigintArray([7, 8])]).fetchone()
        assert row == ([7, 8],)
