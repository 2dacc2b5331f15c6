"""The demo in a user's database: it keeps to its own objects and to the schema it is given."""

from __future__ import annotations

import io

import psycopg
import pytest

from simindex.demo import INDEXES, run
from simindex.errors import IndexExistsError
from simindex.index import create_index, list_indexes


def test_an_index_name_the_demo_needs_is_left_alone(database_dsn: str) -> None:
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE docs (id integer PRIMARY KEY, body text)")
    create_index(database_dsn, "demo_simhash", "docs", "body")
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(IndexExistsError, match=r"demo_simhash.*public\.docs"):
        run(database_dsn, out=out, err=err)
    assert list_indexes(database_dsn) == ["demo_simhash"]
    with psycopg.connect(database_dsn) as conn:
        assert conn.execute("SELECT to_regclass('simindex_demo.documents')").fetchone() == (None,)
    assert out.getvalue() == ""


def test_the_demo_in_another_index_schema(empty_database_dsn: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    run(empty_database_dsn, index_schema="Demo Schema", out=out, err=err)
    assert sorted(list_indexes(empty_database_dsn, index_schema="Demo Schema")) == sorted(INDEXES)
    report = out.getvalue()
    assert "--schema 'Demo Schema'" in report
    query = " ".join(
        line.strip() for line in report.splitlines() if line.startswith(("  SELECT", "  JOIN"))
    )
    assert '"Demo Schema".near_key_v1(' in query
    with psycopg.connect(empty_database_dsn) as conn:
        assert conn.execute(query.encode()).fetchall()
    assert err.getvalue().startswith("simindex: installing")
