"""A writer's transaction indexes the keys it changed, and no other.

Issue 20, finding 5 and build item 5: the writer right (what ``simindex.sqlalchemy`` uses to
index a session's writes before its commit) wrote the side tables, queue and failed items
directly and saw every row of them: a writer deleted another application's index rows, forged
a near-duplicate into it and emptied its queue. Now it writes no table of simindex's: each
index's ``<name>_index_own_v1`` (SECURITY DEFINER) writes the keys whose queue entries this
transaction wrote, and refuses any other. Every role here logs in as itself and is no
superuser.
"""

from __future__ import annotations

import psycopg
import pytest
from psycopg.types.json import Jsonb

import simindex
from simindex import sync
from simindex.core.spec import MinHash
from simindex.index import Index, create_index
from simindex.ops.queue import queue_counts
from simindex.sqlalchemy import index_changes
from tests.security.conftest import MakeRole, Role, scalar, superuser

ROW = "a row its writer indexes before the commit, in its own transaction"
FORGED = "SELECT simindex.docs_index_own_v1(%s::integer[], %s, NULL)"


@pytest.fixture
def indexes(database_dsn: str) -> tuple[Index, Index]:
    """``docs`` (SimHash) and another application's ``pages`` (MinHash), built, 10 rows each."""
    for table in ("docs", "pages"):
        superuser(
            database_dsn,
            f"CREATE TABLE {table} (id integer PRIMARY KEY, body text)",
            f"INSERT INTO {table} SELECT n, 'row ' || n || ' of {table}, which says ' || (n % 3) "
            "|| ' things about the weather' FROM generate_series(1, 10) AS n",
        )
    docs = create_index(database_dsn, "docs", "docs", "body")
    pages = create_index(database_dsn, "pages", "pages", "body", method=MinHash(threshold=0.5))
    docs.build()
    pages.build()
    return docs, pages


@pytest.fixture
def writer(database_dsn: str, make_role: MakeRole, indexes: tuple[Index, Index]) -> Role:
    """A writer of ``docs`` alone, which may write both tables (as an app role may)."""
    role = make_role("writer")
    superuser(database_dsn, f"GRANT ALL ON docs, pages TO {role.name}")
    simindex.grant(database_dsn, role.name, "writer", indexes=["docs"])
    return role


def side_rows(dsn: str, index: str) -> int:
    table = "docs_simhash" if index == "docs" else "pages_minhash"
    return int(scalar(dsn, f"SELECT count(*) FROM simindex.{table}"))


def test_a_writer_writes_no_table_of_simindex_and_sees_no_row_beyond_the_source(
    database_dsn: str, writer: Role
) -> None:
    tables = ("docs_simhash", "docs_queue", "docs_inbox", "docs_failed", "pages_minhash")
    for table in (*tables, "pages_queue", "pages_inbox"):
        for write in (
            f"DELETE FROM simindex.{table}",
            f"UPDATE simindex.{table} SET key = key",
            f"INSERT INTO simindex.{table} (key) VALUES (99)",
            f"SELECT key FROM simindex.{table} FOR UPDATE",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                writer.run(write)
    # No exemption from the side tables' row-level security (it was for roles that may DELETE).
    superuser(database_dsn, f"REVOKE SELECT ON docs FROM {writer.name}")
    superuser(database_dsn, f"GRANT SELECT (body) ON docs TO {writer.name}")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):  # the probe reads the key column
        writer.scalar("SELECT count(*) FROM simindex.docs_simhash")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        writer.scalar("SELECT count(*) FROM simindex.pages_minhash")  # not its index at all


def test_a_writer_cannot_write_or_remove_a_key_its_transaction_did_not_change(
    database_dsn: str, writer: Role
) -> None:
    before = side_rows(database_dsn, "docs")
    superuser(database_dsn, "UPDATE docs SET body = body || ' (changed)' WHERE id = 3")
    assert queue_counts(database_dsn, "docs") == (1, 0)  # another transaction's entry
    with psycopg.connect(writer.dsn) as conn:
        conn.execute("INSERT INTO docs VALUES (100, %s)", (ROW,))  # its own key
        for keys in ([5], [3], [100, 5], [100, 3]):  # unqueued; another's entry; with its own
            with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                conn.execute(FORGED, (keys, None))
        forged = [{"key": 7, "fingerprint": 0, "p0": 0, "p1": 0, "p2": 0, "p3": 0}]
        with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
            conn.execute(FORGED, ([], Jsonb(forged)))
        with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
            conn.execute("SELECT simindex.pages_index_own_v1('{1}', NULL, NULL)")  # not its index
        with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
            conn.execute("SELECT simindex.record_health_v1('docs', 'broken', 'x')")
        assert index_changes(conn) == 1  # its own key, through the same function
        conn.commit()
    assert side_rows(database_dsn, "docs") == before + 1
    assert queue_counts(database_dsn, "docs") == (1, 0)  # key 3 stays the worker's
    # Its own index's other rows and another application's index are as they were.
    assert sync(database_dsn).indexed == 1
    assert side_rows(database_dsn, "docs") == before + 1
    assert side_rows(database_dsn, "pages") == 10


def test_this_transactions_entry_is_told_by_its_xmin_in_progress_savepoints_included(
    database_dsn: str, writer: Role
) -> None:
    # The reasoning of the function's check: an entry visible here whose xmin is a transaction
    # in progress is this transaction's (another's uncommitted entry is invisible), written in
    # a savepoint or not; one of a savepoint rolled back is gone.
    with psycopg.connect(writer.dsn) as other, psycopg.connect(writer.dsn) as conn:
        other.execute("INSERT INTO docs VALUES (200, %s)", (ROW,))  # uncommitted, in progress
        conn.execute("INSERT INTO docs VALUES (101, %s)", (ROW,))
        with conn.transaction():
            conn.execute("INSERT INTO docs VALUES (102, %s)", (ROW,))
            with conn.transaction():
                conn.execute("UPDATE docs SET body = %s WHERE id = 4", (ROW,))
        with conn.transaction(force_rollback=True):
            conn.execute("INSERT INTO docs VALUES (103, %s)", (ROW,))
        status = conn.execute(
            "SELECT q.key, pg_xact_status(q.xmin::text::xid8) FROM simindex.docs_inbox AS q "
            "ORDER BY 1"
        ).fetchall()
        assert status == [(4, "in progress"), (101, "in progress"), (102, "in progress")]
        with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
            conn.execute(FORGED, ([200], None))  # the other transaction's, invisible here
        with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
            conn.execute(FORGED, ([103], None))  # rolled back with its savepoint
        assert index_changes(conn) == 3
        conn.commit()
        other.commit()
    assert queue_counts(database_dsn, "docs") == (1, 0)  # 200: the worker's
    assert {m.key for m in Index(database_dsn, "docs").near(ROW, max_distance=0)} == {
        4,
        101,
        102,
    }


def test_the_writer_right_on_every_index_reaches_indexes_made_later(
    database_dsn: str, make_role: MakeRole, indexes: tuple[Index, Index]
) -> None:
    writer, reader = make_role("writer"), make_role("reader")
    simindex.grant(database_dsn, writer.name, "writer")
    simindex.grant(database_dsn, reader.name, "reader")
    superuser(
        database_dsn,
        "CREATE TABLE later (id integer PRIMARY KEY, body text)",
        f"GRANT ALL ON later TO {writer.name}, {reader.name}",
    )
    create_index(database_dsn, "later", "later", "body").build()
    own = "simindex.later_index_own_v1(integer[], jsonb, jsonb)"
    query = f"SELECT has_function_privilege(%s, '{own}', 'EXECUTE')"
    assert scalar(database_dsn, query, (writer.name,)) is True
    assert scalar(database_dsn, query, (reader.name,)) is False
    with psycopg.connect(writer.dsn) as conn:
        conn.execute("INSERT INTO later VALUES (1, %s)", (ROW,))
        assert index_changes(conn) == 1
    with psycopg.connect(reader.dsn) as conn:
        conn.execute("INSERT INTO later VALUES (2, %s)", (ROW,))
        assert index_changes(conn) == 0  # no right: its entry stays the worker's
    assert queue_counts(database_dsn, "later") == (1, 0)
