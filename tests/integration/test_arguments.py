"""Wrong arguments get a sentence, never a driver error or a traceback from deep inside: every
public Python entry point raises TypeError, ValueError or LookupError, and every SQL function
simindex installs raises SQLSTATE 22023 (more cases, and the sane answers to a NULL key or an
unknown index, in test_sql_arguments.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from alembic.operations import Operations
from alembic.runtime.migration import MigrationContext

import simindex.sqlalchemy as selectables
from simindex import check, repair, sync
from simindex.alembic import CreateSimindexOp
from simindex.core.spec import MinHash, SimHash
from simindex.db.connection import connect
from simindex.index import Index, create_index, drop_index, get_index, list_indexes

BAD = [None, "x", 1.5, float("nan"), -1, True, [1], object(), 10**30, b"x"]
TEXT = " ".join(f"w{i}" for i in range(30))


def _tables(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        for table in ("docs", "notes"):
            conn.execute(f"CREATE TABLE {table} (id integer PRIMARY KEY, body text)")
            conn.execute(
                f"INSERT INTO {table} SELECT g, %s || g FROM generate_series(1, 20) AS g", [TEXT]
            )


def _alembic(dsn: str, **arguments: Any) -> None:
    with connect(dsn) as connection, connection.begin():
        operations = Operations(MigrationContext.configure(connection))
        operations.invoke(CreateSimindexOp("z", "docs", "body", **arguments))


def _entry_points(dsn: str, s: Index, m: Index) -> dict[str, Callable[[Any], object]]:
    return {
        "create_index name": lambda v: create_index(dsn, v, "docs", "body"),
        "create_index table": lambda v: create_index(dsn, "z", v, "body"),
        "create_index column": lambda v: create_index(dsn, "z", "docs", v),
        "create_index key": lambda v: create_index(dsn, "z", "docs", "body", key=v),
        "create_index schema": lambda v: create_index(dsn, "z", "docs", "body", schema=v),
        "create_index method": lambda v: create_index(dsn, "z", "docs", "body", method=v),
        "create_index index_schema": lambda v: create_index(
            dsn, "z", "docs", "body", index_schema=v
        ),
        "SimHash max_distance": lambda v: create_index(
            dsn, "z", "docs", "body", method=SimHash(max_distance=v)
        ),
        "SimHash num_blocks": lambda v: create_index(
            dsn, "z", "docs", "body", method=SimHash(num_blocks=v)
        ),
        "SimHash top_n": lambda v: create_index(dsn, "z", "docs", "body", method=SimHash(top_n=v)),
        "SimHash expected_rows": lambda v: create_index(
            dsn, "z", "docs", "body", method=SimHash(expected_rows=v)
        ),
        "SimHash shingling": lambda v: create_index(
            dsn, "z", "docs", "body", method=SimHash(shingling=v)
        ),
        "MinHash threshold": lambda v: create_index(
            dsn, "z", "docs", "body", method=MinHash(threshold=v)
        ),
        "MinHash num_perm": lambda v: create_index(
            dsn, "z", "docs", "body", method=MinHash(num_perm=v)
        ),
        "MinHash scheme": lambda v: create_index(
            dsn, "z", "docs", "body", method=MinHash(scheme=v)
        ),
        "MinHash seed": lambda v: create_index(dsn, "z", "docs", "body", method=MinHash(seed=v)),
        "get_index name": lambda v: get_index(dsn, v),
        "drop_index name": lambda v: drop_index(dsn, v),
        "list_indexes index_schema": lambda v: list_indexes(dsn, index_schema=v),
        "list_indexes bind": lambda v: list_indexes(v),
        "Index name": lambda v: Index(dsn, v),
        "build batch_size": lambda v: s.build(batch_size=v),
        "build workers": lambda v: s.build(workers=v),
        "build progress": lambda v: s.build(progress=v),
        "near text": lambda v: s.near(v),
        "near fingerprint": lambda v: s.near(fingerprint=v),
        "near max_distance": lambda v: s.near(TEXT, max_distance=v),
        "near_key key": lambda v: s.near_key(v),
        "near_key max_distance": lambda v: s.near_key(1, max_distance=v),
        "similar text": lambda v: m.similar(v),
        "similar key": lambda v: m.similar(key=v),
        "similar threshold": lambda v: m.similar(TEXT, threshold=v),
        "pairs max_distance": lambda v: list(s.pairs(max_distance=v)),
        "pairs threshold": lambda v: list(m.pairs(threshold=v)),
        "clusters method": lambda v: s.clusters(method=v),
        "clusters max_distance": lambda v: s.clusters(max_distance=v),
        "clusters threshold": lambda v: m.clusters(threshold=v),
        "clusters bottom_k": lambda v: s.clusters(method="bottom_k", bottom_k=v),
        "cluster_members min_size": lambda v: list(s.cluster_members(min_size=v)),
        "survivors method": lambda v: list(s.survivors(v)),
        "survivors prefer": lambda v: list(s.survivors("pairs", prefer=v)),
        "sync names": lambda v: sync(dsn, v),
        "sync batch_size": lambda v: sync(dsn, batch_size=v),
        "sync heartbeat": lambda v: sync(dsn, heartbeat=v),
        "sync connections": lambda v: sync(dsn, connections=v),
        "sync max_text_bytes": lambda v: sync(dsn, max_text_bytes=v),
        "sync index_schema": lambda v: sync(dsn, index_schema=v),
        "check name": lambda v: check(dsn, v),
        "check sample": lambda v: check(dsn, "s", sample=v),
        "repair sample": lambda v: repair(dsn, "s", sample=v),
        "repair batch_size": lambda v: repair(dsn, "s", batch_size=v),
        "sqlalchemy near name": lambda v: selectables.near(dsn, v, TEXT),
        "sqlalchemy near text": lambda v: selectables.near(dsn, "s", v),
        "sqlalchemy near fingerprint": lambda v: selectables.near(dsn, "s", fingerprint=v),
        "sqlalchemy near max_distance": lambda v: selectables.near(dsn, "s", TEXT, max_distance=v),
        "sqlalchemy near key_type": lambda v: selectables.near(dsn, "s", TEXT, key_type=v),
        "sqlalchemy near_key name": lambda v: selectables.near_key(dsn, v, 1),
        "sqlalchemy near_key max_distance": lambda v: selectables.near_key(
            dsn, "s", 1, max_distance=v
        ),
        "sqlalchemy similar text": lambda v: selectables.similar(dsn, "m", v),
        "sqlalchemy similar threshold": lambda v: selectables.similar(dsn, "m", TEXT, threshold=v),
        "sqlalchemy similar_key threshold": lambda v: selectables.similar_key(
            dsn, "m", 1, threshold=v
        ),
        "alembic method": lambda v: _alembic(dsn, method=v),
        "alembic max_distance": lambda v: _alembic(dsn, method="simhash", max_distance=v),
        "alembic threshold": lambda v: _alembic(dsn, method="minhash", threshold=v),
        "alembic key": lambda v: _alembic(dsn, key=v),
    }


def test_every_python_entry_point_refuses_wrong_arguments_with_a_sentence(
    database_dsn: str,
) -> None:
    _tables(database_dsn)
    s = create_index(database_dsn, "s", "docs", "body")
    s.build()
    m = create_index(database_dsn, "m", "notes", "body", method=MinHash())
    m.build()
    s.clusters()
    m.clusters()
    wrong: list[str] = []
    for name, call in _entry_points(database_dsn, s, m).items():
        for value in BAD:
            try:
                call(value)
            except (TypeError, ValueError, LookupError) as exc:
                module = type(exc).__module__.split(".")[0]
                if module in ("psycopg", "sqlalchemy") or len(str(exc)) < 12:
                    wrong.append(f"{name}={value!r}: {type(exc).__name__}: {exc}")
            except Exception as exc:  # anything else is the defect this test looks for
                wrong.append(f"{name}={value!r}: {type(exc).__module__}.{type(exc).__name__}")
            finally:
                for index in list_indexes(database_dsn):
                    if index not in ("s", "m"):
                        drop_index(database_dsn, index)
    assert wrong == []


def test_the_driver_error_is_kept_as_the_cause(database_dsn: str) -> None:
    _tables(database_dsn)
    index = create_index(database_dsn, "s", "docs", "body")
    index.build()
    with pytest.raises(ValueError, match="bad key 'x' for key type integer") as raised:
        index.near_key("x")
    assert isinstance(raised.value.__cause__, psycopg.DataError)
    with pytest.raises(TypeError, match="is a bool, which does not fit the index's key type"):
        index.near_key(True)
    with pytest.raises(TypeError, match=r"key 1\.5 is a float, which does not fit .* integer"):
        index.near_key(1.5)
    with pytest.raises(ValueError, match="key must not be None"):
        index.near_key(None)
    with pytest.raises(TypeError, match=r"method must be SimHash.*for the Alembic operation"):
        create_index(database_dsn, "z", "docs", "body", method="simhash")  # type: ignore[arg-type]
    with pytest.raises(LookupError, match="simindex's schema 'nowhere' is not installed"):
        list_indexes(database_dsn, index_schema="nowhere")


SQL_ERRORS = [
    ("SELECT * FROM simindex.near_key_v1(NULL, 1)", "index_name must not be NULL"),
    ("SELECT * FROM simindex.near_key_v1('s', 1, -1)", "max_distance must be from 0 to"),
    ("SELECT * FROM simindex.near_key_v1('s', 1, 4)", "max_distance must be from 0 to"),
    ("SELECT * FROM simindex.near_key_v1('m', 1)", "is a MinHash index"),
    ("SELECT * FROM simindex.similar_key_v1(NULL, 1)", "index_name must not be NULL"),
    ("SELECT * FROM simindex.similar_key_v1('m', 1, 'NaN')", "threshold must be from 0 to 1"),
    ("SELECT * FROM simindex.similar_key_v1('m', 1, 1.5)", "threshold must be from 0 to 1"),
    ("SELECT * FROM simindex.similar_key_v1('m', 1, -1)", "threshold must be from 0 to 1"),
    ("SELECT * FROM simindex.similar_key_v1('s', 1)", "is a SimHash index"),
    ("SELECT * FROM simindex.s_near_v1(0, NULL)", "max_distance must be from 0 to 3"),
    ("SELECT * FROM simindex.s_near_v1(0, -1)", "max_distance must be from 0 to 3"),
    ("SELECT * FROM simindex.s_near_key_v1(1, 4)", "max_distance must be from 0 to 3"),
    ("SELECT * FROM simindex.s_pairs_v1(NULL)", "max_distance must be from 0 to 3"),
    ("SELECT * FROM simindex.s_pairs_v1(9)", "max_distance must be from 0 to 3"),
    ("SELECT * FROM simindex.m_similar_v1(NULL, NULL, 'NaN')", "threshold must be from 0"),
    ("SELECT * FROM simindex.m_similar_v1(NULL, NULL, NULL)", "threshold must be from 0"),
    ("SELECT * FROM simindex.m_similar_v1(B'1', NULL)", "a sketch of 1792 bits and"),
    ("SELECT * FROM simindex.m_similar_v1(NULL, '{1}')", "a sketch of 1792 bits and"),
    ("SELECT * FROM simindex.m_similar_key_v1(1, 2)", "threshold must be from 0 to 1"),
    ("SELECT * FROM simindex.m_pairs_v1('NaN')", "threshold must be from"),
    ("SELECT * FROM simindex.m_pairs_v1(-0.5)", "threshold must be from"),
    ("SELECT * FROM simindex.s_survivors_v1(NULL)", "clustering must be"),
    ("SELECT * FROM simindex.s_survivors_v1('leader', 'biggest')", "prefer must be"),
    ("SELECT * FROM simindex.s_survivors_v1('leader', 'newest:nothing')", "names no column"),
    ("SELECT * FROM simindex.s_survivors_v1('bottom_k')", "of its last clusters run, method"),
    ("SELECT simindex.s_cluster_rows_v1(NULL)", "keys must not be NULL"),
]


def test_every_sql_function_refuses_wrong_arguments_with_22023(database_dsn: str) -> None:
    _tables(database_dsn)
    create_index(database_dsn, "s", "docs", "body").build()
    create_index(database_dsn, "m", "notes", "body", method=MinHash()).build()
    Index(database_dsn, "s").clusters(method="leader")
    wrong: list[str] = []
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        for query, message in SQL_ERRORS:
            try:
                conn.execute(query).fetchall()
            except psycopg.Error as exc:
                if exc.sqlstate != "22023" or message not in str(exc):
                    wrong.append(f"{query}: {exc.sqlstate} {exc}")
            else:
                wrong.append(f"{query}: no error")
    assert wrong == []
