"""No index goes stale in silence (issue 20, findings 13 to 17).

Each test runs what an ordinary role (the table's owner, a writer) or a routine operation does
to an indexed table, and then asks every health signal: either the index still follows the
table exactly (``check`` finds nothing after a ``sync``), or it says why not (``needs_rebuild``
with a reason, in ``info``, ``stats``, the metrics and ``check``) and one ``build`` mends it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import simindex
from simindex import check, sync
from simindex._metrics import exposition
from simindex.db.connection import dispose_engines
from simindex.db.schema import migrate
from simindex.embedded import (
    apply_settings,
    embedded_bindir,
    find_local_bindir,
    local_postgres,
    restart_local_postgres,
)
from simindex.errors import IndexNotReadyError, SourceError
from simindex.index import Index, create_index, get_index
from simindex.ops.stats import index_stats
from tests.security.conftest import (
    MakeRole,
    Role,
    drop_event_triggers,
    owned_table,
    scalar,
    superuser,
)

DOCS = "CREATE TABLE docs (id integer PRIMARY KEY, body text)"


TRIGGER_MODES = {
    **{f"simindex_docs_{event}": "A" for event in ("insert", "update", "delete", "truncate")},
    **{f"simindex_docs_{event}_row": "R" for event in ("insert", "update", "delete")},
}
"""The index's triggers, as created: statement triggers fire ALWAYS, row triggers (for the
apply of logical replication, which fires no statement trigger) in replica mode only."""


def trigger_modes(dsn: str) -> dict[str, str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT tgname, tgenabled FROM pg_trigger "
            "WHERE tgrelid = 'docs'::regclass AND tgname LIKE 'simindex%%'"
        ).fetchall()
    return dict(rows)


def assert_exact(dsn: str, index: Index, text: str = "body") -> None:
    """After a sync, the index holds exactly what a recomputation over the table gives."""
    sync(dsn)
    report = check(dsn, index.name)
    assert (report.missing, report.stale, report.orphaned) == ([], [], [])
    assert report.checked == scalar(dsn, f"SELECT count(*) FROM docs WHERE {text} IS NOT NULL")


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
    assert trigger_modes(database_dsn) == TRIGGER_MODES


# -- finding 13: triggers disabled or dropped

TRIGGER_CHANGES = {
    "disable all": ("ALTER TABLE docs DISABLE TRIGGER ALL", "INSERT (disabled)"),
    "disable one": ("ALTER TABLE docs DISABLE TRIGGER simindex_docs_update", "UPDATE (disabled)"),
    "origin mode only": (
        "ALTER TABLE docs ENABLE TRIGGER simindex_docs_insert",
        "INSERT (not in replica mode)",
    ),
    "drop one": ("DROP TRIGGER simindex_docs_delete ON docs", "DELETE (dropped)"),
    "disable a row trigger": (
        "ALTER TABLE docs DISABLE TRIGGER simindex_docs_insert_row",
        "replicated INSERT (disabled)",
    ),
    "drop a row trigger": (
        "DROP TRIGGER simindex_docs_update_row ON docs",
        "replicated UPDATE (dropped)",
    ),
}


@pytest.mark.parametrize("watched", [True, False], ids=["event triggers", "no event triggers"])
@pytest.mark.parametrize("change", sorted(TRIGGER_CHANGES))
def test_disabled_or_dropped_triggers_are_seen_everywhere_and_a_build_mends_them(
    database_dsn: str, owner: Role, change: str, watched: bool
) -> None:
    if not watched:
        drop_event_triggers(database_dsn)
    index = create_index(database_dsn, "docs", "docs", "body")
    index.build()
    statement, reason = TRIGGER_CHANGES[change]
    owner.run(statement)
    owner.run(
        "INSERT INTO docs VALUES (100, 'written while a trigger was off')",
        "UPDATE docs SET body = 'changed while a trigger was off' WHERE id = 1",
        "DELETE FROM docs WHERE id = 2",
    )
    # The event triggers record it at once; without them every reader finds it all the same.
    stored = scalar(database_dsn, "SELECT state FROM simindex.indexes WHERE name = 'docs'")
    assert stored == ("needs_rebuild" if watched else "ready")
    info = index.info()
    assert (info.state, reason in (info.state_reason or "")) == ("needs_rebuild", True)
    [stats] = index_stats(database_dsn)
    assert stats.info.state == "needs_rebuild"
    metrics = exposition([stats])
    assert 'simindex_index_needs_rebuild{index="docs"} 1.0' in metrics
    assert 'state="needs_rebuild"' in metrics
    with pytest.raises(IndexNotReadyError, match="triggers do not fire"):
        check(database_dsn, "docs")
    assert reason in sync(database_dsn).broken["docs"]  # and `simindex sync` exits 1
    with pytest.raises(IndexNotReadyError, match="needs a rebuild"):
        index.near("written while a trigger was off")
    index.build()  # made again: its triggers too
    assert index.info().state == "ready"
    assert 'simindex_index_needs_rebuild{index="docs"} 0.0' in exposition(index_stats(database_dsn))
    owner.run(
        "INSERT INTO docs VALUES (101, 'written after the build')",
        "UPDATE docs SET body = 'changed after the build' WHERE id = 3",
        "DELETE FROM docs WHERE id = 4",
    )
    assert_exact(database_dsn, index)


# -- findings 14 and 15: partitions and inheritance


REFUSED = {
    "partitioned": (
        "CREATE TABLE docs (id integer PRIMARY KEY, body text) PARTITION BY RANGE (id); "
        "CREATE TABLE docs_1 PARTITION OF docs FOR VALUES FROM (0) TO (1000)",
        "docs",
        "partitioned",
    ),
    "a partition": (
        "CREATE TABLE docs (id integer PRIMARY KEY, body text) PARTITION BY RANGE (id); "
        "CREATE TABLE docs_1 PARTITION OF docs FOR VALUES FROM (0) TO (1000)",
        "docs_1",
        "partition or an inheritance child of public.docs",
    ),
    "a parent": (
        "CREATE TABLE docs (id integer PRIMARY KEY, body text); "
        "CREATE TABLE docs_old (PRIMARY KEY (id)) INHERITS (docs)",
        "docs",
        "inheritance children",
    ),
    "a child": (
        "CREATE TABLE base (id integer, body text); "
        "CREATE TABLE docs (PRIMARY KEY (id)) INHERITS (base)",
        "docs",
        "inheritance child of public.base",
    ),
}


@pytest.mark.parametrize("kind", sorted(REFUSED))
def test_create_refuses_a_table_in_a_partitioning_or_inheritance_tree(
    database_dsn: str, make_role: MakeRole, kind: str
) -> None:
    create, table, message = REFUSED[kind]
    alice = make_role("owner")
    owned_table(database_dsn, alice, create, rows=0)
    simindex.grant(database_dsn, alice.name, "admin")
    with pytest.raises(SourceError, match=message):
        create_index(alice.dsn, "docs", table, "body")
    assert scalar(database_dsn, "SELECT count(*) FROM simindex.indexes") == 0


CHILDREN = {  # how: (the owner's DDL, how the owner undoes it)
    "a child made": ("CREATE TABLE docs_old () INHERITS (docs)", "DROP TABLE docs_old"),
    "made a child": (
        "CREATE TABLE base (id integer, body text); ALTER TABLE docs INHERIT base",
        "ALTER TABLE docs NO INHERIT base",
    ),
    "attached as a partition": (
        "CREATE TABLE all_docs (id integer NOT NULL, body text) PARTITION BY RANGE (id); "
        "ALTER TABLE all_docs ATTACH PARTITION docs FOR VALUES FROM (0) TO (100000)",
        "ALTER TABLE all_docs DETACH PARTITION docs",
    ),
}


@pytest.mark.parametrize("watched", [True, False], ids=["event triggers", "no event triggers"])
@pytest.mark.parametrize("how", sorted(CHILDREN))
def test_a_source_that_joins_an_inheritance_tree_is_marked(
    database_dsn: str, owner: Role, index: Index, how: str, watched: bool
) -> None:
    if not watched:
        drop_event_triggers(database_dsn)
    change, undo = CHILDREN[how]
    owner.run(change)
    stored = scalar(database_dsn, "SELECT state FROM simindex.indexes WHERE name = 'docs'")
    assert stored == ("needs_rebuild" if watched else "ready")
    info = index.info()
    assert info.state == "needs_rebuild"
    assert "inherit" in (info.state_reason or "") or "partition" in (info.state_reason or "")
    assert 'simindex_index_needs_rebuild{index="docs"} 1.0' in exposition(index_stats(database_dsn))
    # A build says why it cannot make it again, until the tree is undone.
    with pytest.raises(SourceError, match="inheritance"):
        index.build()
    with pytest.raises(IndexNotReadyError, match="bypass its triggers"):
        check(database_dsn, "docs")
    owner.run(undo)
    index.build()
    owner.run("INSERT INTO docs VALUES (100, 'written after the tree was undone')")
    assert_exact(database_dsn, index)


# -- finding 17: pg_dump and pg_restore


def _client(name: str, dsn: str) -> str:
    """A pg_dump or pg_restore of the server's major version or newer (the one on PATH, or
    the embedded server's), or the test skips."""
    server_major = int(scalar(dsn, "SHOW server_version_num")) // 10000
    bindir = embedded_bindir()
    candidates = [shutil.which(name), str(bindir / name) if bindir is not None else None]
    majors = []
    for found in filter(None, candidates):
        version = subprocess.run([found, "--version"], capture_output=True, text=True)
        if version.returncode != 0:
            continue
        majors.append(int(re.findall(r"\d+", version.stdout)[0]))
        if majors[-1] >= server_major:
            return found
    pytest.skip(f"no {name} of PostgreSQL {server_major} or newer (found {majors})")


@pytest.fixture
def restored(database_dsn: str) -> Iterator[Callable[[Path], str]]:
    """``restored(dump)``: a new database of the same server with ``dump`` restored into it
    (by a superuser, as a DBA restores), its DSN; dropped after the test."""
    made: list[str] = []

    def restore(dump: Path) -> str:
        name = f"{conninfo_to_dict(database_dsn)['dbname']}_restored_{len(made) + 1}"
        superuser(database_dsn, f"DROP DATABASE IF EXISTS {name}", f"CREATE DATABASE {name}")
        made.append(name)
        dsn = make_conninfo(database_dsn, dbname=name)
        subprocess.run(
            [_client("pg_restore", dsn), "--exit-on-error", "--dbname", dsn, str(dump)],
            check=True,
            capture_output=True,
        )
        return dsn

    yield restore
    dispose_engines()
    for name in made:
        superuser(database_dsn, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.mark.parametrize("mended_by", ["the app's next write", "a build", "simindex migrate"])
def test_a_dump_and_restore_leaves_every_index_answering(
    database_dsn: str,
    make_role: MakeRole,
    restored: Callable[[Path], str],
    tmp_path: Path,
    mended_by: str,
) -> None:
    alice = make_role("owner")
    # Dropped columns before the text column: a restore numbers the columns anew.
    owned_table(
        database_dsn,
        alice,
        "CREATE TABLE docs (old_a text, id integer PRIMARY KEY, old_b text, body text)",
        rows=0,
    )
    alice.run(
        "INSERT INTO docs (id, body) SELECT n, 'the text of row ' || n || ' says ' || (n % 7) "
        "|| ' things' FROM generate_series(1, 20) AS n",
        # Text columns after it: restored, the text column's old number is the tag's.
        "ALTER TABLE docs ADD COLUMN note text, ADD COLUMN tag text",
        "ALTER TABLE docs DROP COLUMN old_a",
        "ALTER TABLE docs DROP COLUMN old_b",
    )
    index = create_index(database_dsn, "docs", "docs", "body")
    index.build()
    dump = tmp_path / "app.dump"
    subprocess.run(
        [_client("pg_dump", database_dsn), "--format=custom", "--file", str(dump), database_dsn],
        check=True,
        capture_output=True,
    )
    dsn = restored(dump)
    app = Role(alice.name, make_conninfo(alice.dsn, dbname=conninfo_to_dict(dsn)["dbname"]))
    moved = get_index(dsn, "docs")
    info = moved.info()
    assert info.state == "needs_rebuild"
    assert "restore" in (info.state_reason or "")
    assert info.source.text_column == "body"  # by name, not the column now at its old number
    if mended_by == "a build":
        moved.build()
    if mended_by == "simindex migrate":
        migrate(dsn)
        assert moved.info().state == "ready"
        # Found again already: even a rename first is followed.
        app.run("ALTER TABLE docs RENAME COLUMN note TO remark")
        assert moved.info().state == "ready"
    app.run(
        "INSERT INTO docs (id, body, tag) VALUES (100, 'a row written after the restore', 't')",
        "UPDATE docs SET tag = 'only the tag changed' WHERE id = 3",
        "UPDATE docs SET body = 'a text changed after the restore' WHERE id = 1",
        "DELETE FROM docs WHERE id = 2",
    )
    assert moved.info().state == "ready"
    assert_exact(dsn, moved)
    assert [m.key for m in moved.near("a row written after the restore", max_distance=0)] == [100]
    # Renames after the restore are followed, and a build still finds the columns.
    app.run(
        "ALTER TABLE docs RENAME COLUMN body TO content",
        "INSERT INTO docs (id, content) VALUES (101, 'a row written after the rename')",
    )
    assert_exact(dsn, moved, text="content")
    assert moved.build().rows == scalar(dsn, "SELECT count(*) FROM docs")
    assert_exact(dsn, moved, text="content")


def test_only_the_tables_owner_may_create_an_index_of_it(
    database_dsn: str, owner: Role, make_role: MakeRole
) -> None:
    # The TRIGGER right alone would make triggers of origin mode only, blind to replication.
    admin = make_role("admin")
    simindex.grant(database_dsn, admin.name, "admin")
    superuser(database_dsn, f"GRANT TRIGGER, SELECT ON docs TO {admin.name}")
    with pytest.raises(SourceError, match=f"belongs to {owner.name}.*ALWAYS"):
        create_index(admin.dsn, "docs", "docs", "body")
    superuser(database_dsn, f"GRANT {owner.name} TO {admin.name}")
    create_index(admin.dsn, "docs", "docs", "body").build()
    assert trigger_modes(database_dsn) == TRIGGER_MODES


def test_rows_a_logical_replication_subscription_applies_are_queued() -> None:
    """Rows a subscription copies and applies (its workers run in replica mode) are indexed:
    a cluster of its own, with wal_level = logical, publishing one database to another."""
    if find_local_bindir() is None:
        pytest.skip("needs this machine's PostgreSQL binaries for a cluster with wal_level=logical")
    with local_postgres() as server:
        apply_settings(server, {"wal_level": "logical"})
        restart_local_postgres(server)
        superuser(server, "CREATE DATABASE origin", "CREATE DATABASE replica")
        origin, replica = (make_conninfo(server, dbname=name) for name in ("origin", "replica"))
        try:
            for dsn in (origin, replica):
                superuser(dsn, DOCS)
            superuser(
                origin,
                "INSERT INTO docs SELECT n, 'the text of row ' || n || ' says ' || (n % 7) "
                "FROM generate_series(1, 20) AS n",
                "CREATE PUBLICATION docs_out FOR TABLE docs",
                "SELECT pg_create_logical_replication_slot('docs_in', 'pgoutput')",
            )
            migrate(replica)
            index = create_index(replica, "docs", "docs", "body")
            index.build()
            superuser(
                replica,
                f"CREATE SUBSCRIPTION docs_in CONNECTION '{origin}' PUBLICATION docs_out "
                "WITH (create_slot = false, slot_name = 'docs_in')",
            )
            _replicated(origin, replica)  # the initial copy
            superuser(
                origin,
                "INSERT INTO docs VALUES (100, 'a row that arrived by replication')",
                "UPDATE docs SET body = 'a replicated change of a row' WHERE id = 1",
                "DELETE FROM docs WHERE id = 2",
            )
            _replicated(origin, replica)
            assert scalar(replica, "SELECT count(*) FROM simindex.docs_inbox") > 0
            assert_exact(replica, index)
            assert [m.key for m in index.near("a row that arrived by replication")] == [100]
            superuser(
                origin, "TRUNCATE docs", "INSERT INTO docs VALUES (200, 'after the truncate')"
            )
            _replicated(origin, replica)
            assert_exact(replica, index)
            assert scalar(replica, "SELECT count(*) FROM simindex.docs_simhash") == 1
        finally:
            dispose_engines()
            superuser(replica, "DROP SUBSCRIPTION IF EXISTS docs_in")


def _replicated(origin: str, replica: str) -> None:
    """Wait until the replica's table holds what the origin's does."""
    rows = "SELECT coalesce(string_agg(id || ':' || body, ',' ORDER BY id), '') FROM docs"
    expected = scalar(origin, rows)
    deadline = time.monotonic() + 60
    while scalar(replica, rows) != expected:
        assert time.monotonic() < deadline, "the subscription did not catch up in 60 s"
        time.sleep(0.1)
