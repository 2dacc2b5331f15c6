"""The worker and the admin read a source as they are, never through its owner's code.

Issue 20, findings 7, 9 and 12: a table owner's row-level-security policy ran as the worker in
``sync`` and as the admin (then as simindex_owner) in ``build``; a worker without BYPASSRLS
took the rows a policy hid from it for removed (``repair`` emptied the index); and the
documented worker role could not record an index broken. Every role here logs in as itself
and is no superuser.
"""

from __future__ import annotations

from typing import Any, Literal

import psycopg
import pytest
from psycopg import sql

import simindex
from simindex import check, repair, sync
from simindex.errors import SourceError
from simindex.index import Index, create_index
from simindex.ops.queue import queue_counts
from tests.security.conftest import MakeRole, Role, owned_table, scalar, superuser

DOCS = "CREATE TABLE docs (id integer PRIMARY KEY, body text)"
SIDE_ROWS = "SELECT count(*) FROM simindex.docs_simhash"
# A policy whose function logs who ran it (into a table anyone may write) and hides odd rows.
POLICY = """
CREATE TABLE public.policy_log (who text);
GRANT INSERT ON public.policy_log TO PUBLIC;
CREATE FUNCTION public.visible(id integer) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $f$
BEGIN
    INSERT INTO public.policy_log VALUES (current_user);
    RETURN id % 2 = 0;
END $f$;
ALTER TABLE docs ENABLE ROW LEVEL SECURITY;
CREATE POLICY evens ON docs USING (public.visible(id));
GRANT SELECT ON docs TO PUBLIC;
"""
POLICY_LOG = "SELECT coalesce(array_agg(DISTINCT who), '{}') FROM public.policy_log"


def broken(dsn: str) -> tuple[bool, str | None]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT broken, last_error FROM simindex.indexes WHERE name = 'docs'"
        ).fetchone()
    assert row is not None
    return bool(row[0]), row[1]


@pytest.fixture
def app_owner(database_dsn: str, make_role: MakeRole) -> Role:
    """The app's table ``docs`` (20 rows) belongs to an ordinary role, indexed and built by the
    superuser, with 20 changes queued."""
    owner = make_role("app_owner")
    owned_table(database_dsn, owner, DOCS)
    create_index(database_dsn, "docs", "docs", "body").build()
    owner.run("UPDATE docs SET body = body || ' and then some more'")
    assert queue_counts(database_dsn, "docs") == (20, 0)
    return owner


def test_a_worker_records_an_index_broken_without_rights_on_the_catalog(
    database_dsn: str, app_owner: Role, make_role: MakeRole
) -> None:
    worker = make_role("worker")
    simindex.grant(database_dsn, worker.name, "worker")
    app_owner.run(f"REVOKE SELECT ON docs FROM {worker.name}")
    report = sync(worker.dsn)
    assert "docs" in report.broken
    assert "not recorded" not in report.broken["docs"]
    is_broken, error = broken(database_dsn)
    assert is_broken and error is not None and "permission denied" in error
    with pytest.raises(psycopg.errors.InsufficientPrivilege):  # still no right on the catalog
        worker.run("UPDATE simindex.indexes SET broken = false")
    app_owner.run(f"GRANT SELECT ON docs TO {worker.name}")
    assert sync(worker.dsn).ok
    assert broken(database_dsn)[0] is False


def test_only_the_worker_right_records_health_and_only_as_told(
    database_dsn: str, app_owner: Role, make_role: MakeRole
) -> None:
    worker, reader = make_role("worker"), make_role("reader")
    simindex.grant(database_dsn, worker.name, "worker")
    simindex.grant(database_dsn, reader.name, "reader")
    for bad in (
        "SELECT simindex.record_health_v1('docs', 'healthy', 'x')",
        "SELECT simindex.record_health_v1('docs', 'broken', NULL)",
        "SELECT simindex.record_health_v1(NULL, 'broken', 'x')",
    ):
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            worker.run(bad)
    for role in (reader, app_owner):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            role.run("SELECT simindex.record_health_v1('docs', 'broken', 'x')")
    worker.run(f"SELECT simindex.record_health_v1('docs', 'broken', '{'x' * 10_000}')")
    is_broken, error = broken(database_dsn)
    assert is_broken and error == "x" * 4000


def test_a_worker_of_one_index_records_the_health_of_that_index_only(
    database_dsn: str, app_owner: Role, make_role: MakeRole
) -> None:
    # Issue 20, what was left of build item 6: record_health_v1 took any index's name.
    superuser(
        database_dsn,
        "CREATE TABLE public.other (id integer PRIMARY KEY, body text)",
        "INSERT INTO public.other VALUES (1, 'another application entirely')",
    )
    create_index(database_dsn, "other", "other", "body", schema="public").build()
    worker = make_role("worker")
    simindex.grant(database_dsn, worker.name, "worker", indexes=["docs"])
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="worker right on index"):
        worker.run("SELECT simindex.record_health_v1('other', 'broken', 'forged')")
    assert scalar(database_dsn, "SELECT broken FROM simindex.indexes WHERE name = 'other'") is False
    # The role it SET ROLE to is the caller, not the session's: a superuser acting as the worker
    # is refused too.
    with psycopg.connect(database_dsn) as conn:
        conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(worker.name)))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT simindex.record_health_v1('other', 'broken', 'forged')")
    worker.run("SELECT simindex.record_health_v1('docs', 'broken', 'its own')")
    assert broken(database_dsn) == (True, "its own")
    worker.run("SELECT simindex.record_health_v1('gone', 'broken', 'no such index')")  # no-op


def test_a_worker_subject_to_row_level_security_refuses_rather_than_remove_hidden_rows(
    database_dsn: str, app_owner: Role, make_role: MakeRole
) -> None:
    worker = make_role("worker")
    simindex.grant(database_dsn, worker.name, "worker")
    app_owner.run(POLICY)
    report = sync(worker.dsn)
    assert "docs" in report.broken and "row-level security" in report.broken["docs"]
    is_broken, error = broken(database_dsn)
    assert is_broken and error is not None and "BYPASSRLS" in error
    assert queue_counts(database_dsn, "docs") == (20, 0)
    assert scalar(database_dsn, SIDE_ROWS) == 20
    with pytest.raises(SourceError, match="row-level security"):
        repair(worker.dsn, "docs")
    with pytest.raises(SourceError, match="row-level security"):
        check(worker.dsn, "docs")
    assert scalar(database_dsn, SIDE_ROWS) == 20
    assert scalar(database_dsn, POLICY_LOG) == []  # the owner's policy never ran


def test_a_worker_that_bypasses_row_level_security_indexes_every_row_running_no_policy(
    database_dsn: str, app_owner: Role, make_role: MakeRole
) -> None:
    worker = make_role("worker", "BYPASSRLS")
    simindex.grant(database_dsn, worker.name, "worker")
    app_owner.run(POLICY)
    report = sync(worker.dsn)
    assert report.ok and report.indexed == 20
    assert repair(worker.dsn, "docs").ok
    assert scalar(database_dsn, SIDE_ROWS) == 20
    assert scalar(database_dsn, POLICY_LOG) == []


def test_build_by_an_admin_runs_no_policy_of_the_table_owners(
    database_dsn: str, app_owner: Role, make_role: MakeRole
) -> None:
    """The build read through the policy as the admin, then (having switched role with its
    cursor open) as simindex_owner."""
    admin, bypassing = make_role("admin"), make_role("bypassing", "BYPASSRLS")
    for role in (admin, bypassing):
        simindex.grant(database_dsn, role.name, "admin")
    app_owner.run(POLICY)
    with pytest.raises(SourceError, match="row-level security"):
        Index(admin.dsn, "docs").build()
    assert scalar(database_dsn, SIDE_ROWS) == 20
    assert Index(bypassing.dsn, "docs").build().rows == 20
    assert scalar(database_dsn, POLICY_LOG) == []
    assert check(database_dsn, "docs").ok


def test_no_role_switch_while_the_builds_read_cursor_is_open(
    database_dsn: str, app_owner: Role, make_role: MakeRole, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An admin (a member of simindex_owner that inherits its rights) COPYs into the staging
    tables as itself: simindex_owner is never taken on between the first and the last fetch."""
    import simindex.ops.build as build
    from simindex.db import privileges

    admin = make_role("admin")
    simindex.grant(database_dsn, admin.name, "admin")
    app_owner.run(f"GRANT SELECT ON docs TO {admin.name}")
    events: list[str] = []

    def recorded() -> Any:
        events.append("become_owner")
        return privileges.become_owner()

    monkeypatch.setattr(build, "become_owner", recorded)
    monkeypatch.setattr(build, "_COPY_ROWS", 3)  # COPYs while the cursor is open
    report = Index(admin.dsn, "docs").build(
        batch_size=4, workers=1, progress=lambda done, total: events.append("fetched")
    )
    assert report.rows == 20
    first, last = events.index("fetched"), len(events) - events[::-1].index("fetched")
    assert events[first:last] == ["fetched"] * 5
    assert "become_owner" in events[last:]  # the swap, after the read
    assert check(database_dsn, "docs").ok


def test_clusters_by_an_admin_run_no_policy_of_the_table_owners(
    database_dsn: str, app_owner: Role, make_role: MakeRole
) -> None:
    admin = make_role("admin")
    simindex.grant(database_dsn, admin.name, "admin")
    app_owner.run(POLICY)
    with pytest.raises(SourceError, match="row-level security"):
        Index(admin.dsn, "docs").clusters(method="bottom_k")
    assert scalar(database_dsn, POLICY_LOG) == []


@pytest.mark.parametrize("right", ["worker", "admin"])
def test_roles_that_see_every_index_row_meet_no_deleted_row_in_pairs_or_clusters(
    database_dsn: str, make_role: MakeRole, right: Literal["worker", "admin"]
) -> None:
    """A worker and an admin see every row of the side tables (a deleted row's too, until the
    sweep): their pairs and clusters are joined with the table as they read it."""
    role = make_role(right)
    superuser(database_dsn, DOCS)
    superuser(database_dsn, "INSERT INTO docs SELECT g, 'the same text for every row' FROM "
                            "generate_series(1, 6) AS g")  # fmt: skip
    create_index(database_dsn, "docs", "docs", "body").build()
    simindex.grant(database_dsn, role.name, right)
    superuser(
        database_dsn,
        sql.SQL("GRANT SELECT ON docs TO {}").format(sql.Identifier(role.name)),
        "DELETE FROM docs WHERE id IN (1, 2)",
    )
    assert scalar(role.dsn, SIDE_ROWS) == 6  # not swept yet, and seen
    index = simindex.get_index(role.dsn, "docs")
    named = {key for pair in index.pairs() for key in (pair.left, pair.right)}
    assert named == {3, 4, 5, 6}
    if right == "admin":
        assert index.clusters().rows == 4
        assert {m.cluster_id for m in index.cluster_members()} == {3}
