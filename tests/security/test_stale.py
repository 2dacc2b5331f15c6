"""No index goes stale in silence (issue 20, findings 13 to 17).

Each test runs what an ordinary role (the table's owner, a writer) or a routine operation does
to an indexed table, and then asks every health signal: either the index still follows the
table exactly (``check`` finds nothing after a ``sync``), or it says why not (``needs_rebuild``
with a reason, in ``info``, ``stats``, the metrics and ``check``) and one ``build`` mends it.
"""

from __future__ import annotations

import psycopg
import pytest

from simindex.check import check
from simindex.index import Index, create_index
from simindex.sync import sync
from tests.security.conftest import MakeRole, Role, owned_table, scalar, superuser

DOCS = "CREATE TABLE docs (id integer PRIMARY KEY, body text)"


def assert_exact(dsn: str, index: Index) -> None:
    """After a sync, the index holds exactly what a recomputation over the table gives."""
    sync(dsn)
    report = check(dsn, index.name)
    assert (report.missing, report.stale, report.orphaned) == ([], [], [])
    assert report.checked == scalar(dsn, "SELECT count(*) FROM docs WHERE body IS NOT NULL")


@pytest.fixture
def owner(database_dsn: str, make_role: MakeRole) -> Role:
    """``docs`` belongs to an ordinary role, as an app's table does."""
    alice = make_role("owner")
    owned_table(database_dsn, alice, DOCS)
    return alice


@pytest.fixture
def index(database_dsn: str, owner: Role) -> Index:
    created = create_index(database_dsn, "docs", "docs", "body")
    created.build()
    return created


# -- finding 16: replica mode


def test_writes_in_replica_mode_are_queued(
    database_dsn: str, index: Index, make_role: MakeRole
) -> None:
    # What a logical replication subscription's apply worker does: its session runs with
    # session_replication_role = replica, in which a trigger of origin mode does not fire.
    writer = make_role("writer")
    superuser(
        database_dsn,
        f"GRANT ALL ON docs TO {writer.name}",
        f"GRANT SET ON PARAMETER session_replication_role TO {writer.name}",
    )
    with psycopg.connect(writer.dsn, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")
        conn.execute("INSERT INTO docs VALUES (100, 'a row that arrived by replication')")
        conn.execute("UPDATE docs SET body = 'replicated change of a row' WHERE id = 1")
        conn.execute("DELETE FROM docs WHERE id = 2")
    assert_exact(database_dsn, index)
    assert scalar(
        database_dsn,
        "SELECT array_agg(DISTINCT tgenabled) FROM pg_trigger "
        "WHERE tgrelid = 'docs'::regclass AND tgname LIKE 'simindex%%'",
    ) == ["A"]
