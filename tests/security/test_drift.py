"""Schema drift never breaks the app, and is never silent.

Each ALTER TABLE form, run by the table's owner (an ordinary role) on an indexed table, with and
without the event triggers (a non-superuser migration installs none): afterwards the owner's
INSERT, UPDATE, DELETE and TRUNCATE all succeed, and the index either keeps working (0 missing,
stale or orphaned keys after a sync) or says what happened (``needs_rebuild``, with a build
that brings it back, or ``source_dropped``, with queries that fail saying so). ``drop`` works
whatever happened, and an index of the same name can be created again.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
import pytest
from psycopg import sql

from simindex import check, sync
from simindex.db.schema import downgrade, migrate
from simindex.errors import IndexNotReadyError
from simindex.index import Index, create_index, drop_index
from tests.security.conftest import (
    MakeRole,
    Role,
    drop_event_triggers,
    owned_table,
    scalar,
    superuser,
)

DOCS = "CREATE TABLE docs (note text, id integer PRIMARY KEY, body text)"
NEW_TEXT = "a new text written after the change"


@dataclass(frozen=True, slots=True)
class Form:
    """An ALTER TABLE form, and where the table and its columns are afterwards."""

    statements: tuple[str, ...]
    table: str = "docs"
    schema: str = "public"
    key: str = "id"
    text: str = "body"
    outcome: str = "follows"  # or needs_rebuild, source_dropped


FORMS = {
    "rename table": Form(("ALTER TABLE docs RENAME TO papers",), table="papers"),
    "rename key column": Form(("ALTER TABLE docs RENAME COLUMN id TO doc_id",), key="doc_id"),
    "rename text column": Form(("ALTER TABLE docs RENAME COLUMN body TO content",), text="content"),
    "set schema": Form(("ALTER TABLE docs SET SCHEMA moved",), schema="moved"),
    # PostgreSQL renames a table's columns under other command tags too.
    "rename key column by ALTER VIEW": Form(
        ("ALTER VIEW docs RENAME COLUMN id TO doc_id",), key="doc_id"
    ),
    "rename text column by ALTER MATERIALIZED VIEW": Form(
        ("ALTER MATERIALIZED VIEW docs RENAME COLUMN body TO content",), text="content"
    ),
    "rename key column by ALTER FOREIGN TABLE": Form(
        ("ALTER FOREIGN TABLE docs RENAME COLUMN id TO doc_id",), key="doc_id"
    ),
    "add column": Form(("ALTER TABLE docs ADD COLUMN extra integer DEFAULT 7",)),
    "drop an earlier column": Form(("ALTER TABLE docs DROP COLUMN note",)),
    "alter type of the text": Form(
        ("ALTER TABLE docs ALTER COLUMN body TYPE varchar(200)",), outcome="needs_rebuild"
    ),
    "alter type of the key": Form(
        ("ALTER TABLE docs ALTER COLUMN id TYPE bigint",), outcome="needs_rebuild"
    ),
    "drop the text column": Form(
        ("ALTER TABLE docs DROP COLUMN body", "ALTER TABLE docs ADD COLUMN body text"),
        outcome="needs_rebuild",
    ),
    "drop the key column": Form(
        (
            "ALTER TABLE docs DROP COLUMN id",
            "ALTER TABLE docs ADD COLUMN id integer",
            "UPDATE docs AS d SET id = n.n FROM (SELECT ctid, row_number() OVER () AS n "
            "FROM docs) AS n WHERE n.ctid = d.ctid",
            "ALTER TABLE docs ADD PRIMARY KEY (id)",
        ),
        outcome="needs_rebuild",
    ),
    "drop table": Form(
        (
            "DROP TABLE docs",
            "CREATE TABLE docs (note text, id integer PRIMARY KEY, body text)",
        ),
        outcome="source_dropped",
    ),
}


def app_writes(owner: Role, form: Form, first_key: int) -> None:
    """INSERT, UPDATE, DELETE (and, last, TRUNCATE) as the app would, by today's names."""
    table = sql.Identifier(form.schema, form.table)
    key, text = sql.Identifier(form.key), sql.Identifier(form.text)
    owner.run(
        sql.SQL(
            "INSERT INTO {} ({}, {}) VALUES ({}, 'a new text written after the change')"
        ).format(table, key, text, sql.Literal(first_key)),
        sql.SQL("UPDATE {} SET {} = {} || ' (edited)' WHERE {} = 1").format(table, text, text, key),
        sql.SQL("DELETE FROM {} WHERE {} = 2").format(table, key),
    )


def truncate(owner: Role, form: Form) -> None:
    owner.run(sql.SQL("TRUNCATE {}").format(sql.Identifier(form.schema, form.table)))


@pytest.fixture(params=["event triggers", "no event triggers"])
def event_triggers(request: pytest.FixtureRequest, database_dsn: str) -> bool:
    if request.param == "no event triggers":
        drop_event_triggers(database_dsn)
        return False
    return True


@pytest.mark.parametrize("label", sorted(FORMS))
def test_the_app_keeps_writing_and_the_index_follows_or_says_why(
    database_dsn: str, make_role: MakeRole, event_triggers: bool, label: str
) -> None:
    form = FORMS[label]
    alice = make_role("alice")
    superuser(database_dsn, f"CREATE SCHEMA moved AUTHORIZATION {alice.name}")
    owned_table(database_dsn, alice, DOCS, rows=0)
    alice.run(
        "INSERT INTO docs (note, id, body) SELECT 'n', n, 'the text of row ' || n || ' tells "
        "of ' || (n % 7) || ' things' FROM generate_series(1, 20) AS n"
    )
    index = create_index(database_dsn, "docs", "docs", "body")
    index.build()
    alice.run("INSERT INTO docs (id, body) VALUES (50, 'queued before the change')")
    alice.run(*form.statements)

    app_writes(alice, form, first_key=100)
    if form.outcome == "follows":
        assert index.info().state == "ready"
        report = sync(database_dsn)
        assert report.broken == {}
        assert check(database_dsn, "docs").ok
        assert [m.key for m in index.near(NEW_TEXT, max_distance=0)] == [100]
        truncate(alice, form)
        sync(database_dsn)
        assert check(database_dsn, "docs").ok
    else:
        info = index.info()
        assert info.state == form.outcome, info
        assert info.state_reason
        assert "docs" in sync(database_dsn).broken
        why = "needs a rebuild" if form.outcome == "needs_rebuild" else "was dropped"
        with pytest.raises(IndexNotReadyError, match=why):
            index.near_key(1)
        if form.outcome == "needs_rebuild":
            # Made again for the source as it is now (a column of the old name, if any).
            index.build()
            app_writes(alice, form, first_key=200)
            sync(database_dsn)
            found = check(database_dsn, "docs")
            assert (found.missing, found.stale, found.orphaned) == ([], [], [])
        else:
            with pytest.raises(IndexNotReadyError, match="was dropped"):
                index.build()
        truncate(alice, form)
    drop_index(database_dsn, "docs")
    app_writes(alice, form, first_key=300)
    assert scalar(database_dsn, "SELECT count(*) FROM pg_trigger WHERE NOT tgisinternal") == 0
    create_index(
        database_dsn, "docs", form.table, form.text, schema=form.schema, key=form.key
    ).build()


def test_a_dropped_source_is_marked_at_once_by_the_event_trigger(
    database_dsn: str, make_role: MakeRole
) -> None:
    alice = make_role("alice")
    owned_table(database_dsn, alice, "CREATE TABLE docs (id integer PRIMARY KEY, body text)")
    create_index(database_dsn, "docs", "docs", "body").build()
    alice.run("DROP TABLE docs")
    assert scalar(database_dsn, "SELECT state || ': ' || state_reason FROM simindex.indexes") == (
        "source_dropped: its table public.docs was dropped"
    )
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="drop the index"):
        scalar(database_dsn, "SELECT * FROM simindex.docs_near_v1(0)")


def test_the_event_trigger_follows_renames_and_marks_a_type_change(
    database_dsn: str, make_role: MakeRole
) -> None:
    alice = make_role("alice")
    owned_table(database_dsn, alice, "CREATE TABLE docs (id integer PRIMARY KEY, body text)")
    create_index(database_dsn, "docs", "docs", "body").build()
    names = (
        "SELECT concat_ws(' ', source_table, key_column, text_column, state) FROM simindex.indexes"
    )
    alice.run("ALTER TABLE docs RENAME TO papers", "ALTER TABLE papers RENAME id TO paper_id")
    assert scalar(database_dsn, names) == "papers paper_id body ready"
    for probe in ("docs_visible_v1", "docs_visible_key_v1"):  # both name the table as it is
        body = scalar(database_dsn, "SELECT prosrc FROM pg_proc WHERE proname = %s", (probe,))
        assert "public.papers AS s WHERE s.paper_id " in body
    alice.run("INSERT INTO papers (paper_id, body) VALUES (-5, 'added')")
    assert scalar(database_dsn, "SELECT simindex.docs_visible_key_v1(-5)") == -5
    assert not scalar(database_dsn, "SELECT EXISTS (SELECT simindex.docs_visible_key_v1(-6))")
    alice.run("ALTER TABLE papers ALTER COLUMN body TYPE varchar(100)")
    assert scalar(database_dsn, names) == "papers paper_id body needs_rebuild"
    assert "changed type from text to character varying" in scalar(
        database_dsn, "SELECT state_reason FROM simindex.indexes"
    )


def test_an_event_trigger_never_fails_the_apps_ddl(database_dsn: str, make_role: MakeRole) -> None:
    alice = make_role("alice")
    owned_table(database_dsn, alice, "CREATE TABLE docs (id integer PRIMARY KEY, body text)")
    create_index(database_dsn, "docs", "docs", "body").build()
    # The catalog row held by a build (FOR UPDATE): the event triggers skip it, not wait.
    with psycopg.connect(database_dsn) as holder:
        holder.execute("SELECT 1 FROM simindex.indexes WHERE name = 'docs' FOR UPDATE")
        alice.run("ALTER TABLE docs RENAME COLUMN body TO content", "DROP TABLE docs")


def test_downgrade_to_base_removes_every_index_first(
    database_dsn: str, make_role: MakeRole
) -> None:
    alice = make_role("alice")
    owned_table(database_dsn, alice, "CREATE TABLE docs (id integer PRIMARY KEY, body text)")
    create_index(database_dsn, "docs", "docs", "body").build()
    create_index(database_dsn, "docs_too", "docs", "body").build()
    downgrade(database_dsn)
    assert scalar(database_dsn, "SELECT count(*) FROM pg_trigger WHERE NOT tgisinternal") == 0
    assert scalar(database_dsn, "SELECT count(*) FROM pg_event_trigger") == 0
    alice.run("INSERT INTO docs VALUES (100, 'written with simindex gone')", "TRUNCATE docs")
    migrate(database_dsn)
    index = create_index(database_dsn, "docs", "docs", "body")
    alice.run("INSERT INTO docs VALUES (1, 'a text'), (2, 'a text')")
    index.build()
    assert [m.key for m in Index(database_dsn, "docs").near_key(1)] == [2]


TRUSTED = (
    "SELECT substring(prosrc FROM '/\\* simindex_trusted \\*/ (true|false) AND') "
    "FROM pg_proc WHERE proname = 'docs_trigger_v1'"
)


def test_the_function_reads_unchecked_only_while_the_event_triggers_watch_the_table(
    database_dsn: str, make_role: MakeRole
) -> None:
    alice = make_role("alice")
    owned_table(database_dsn, alice, "CREATE TABLE docs (id integer PRIMARY KEY, body text)")
    index = create_index(database_dsn, "docs", "docs", "body")
    index.build()
    assert scalar(database_dsn, TRUSTED) == "true"
    alice.run("ALTER TABLE docs RENAME COLUMN body TO content")
    assert scalar(database_dsn, TRUSTED) == "false"  # rewritten by the DDL, before any write
    alice.run("INSERT INTO docs VALUES (100, 'written after the rename')")
    index.build()
    assert scalar(database_dsn, TRUSTED) == "true"  # written again for the table as it is
    drop_event_triggers(database_dsn)
    index.build()
    assert scalar(database_dsn, TRUSTED) == "false"  # nobody watches: it checks


def test_a_change_reaching_the_table_from_its_row_type_is_followed(
    database_dsn: str, make_role: MakeRole
) -> None:
    # (A table inheriting from a parent is refused at create: tests/security/test_stale.py.)
    alice = make_role("alice")
    create = (
        "CREATE TYPE doc AS (id integer, body text); CREATE TABLE docs OF doc (PRIMARY KEY (id))"
    )
    change = "ALTER TYPE doc RENAME ATTRIBUTE body TO content CASCADE"
    owned_table(database_dsn, alice, create, rows=0)
    alice.run("INSERT INTO docs VALUES (1, 'one text'), (2, 'one text')")
    index = create_index(database_dsn, "docs", "docs", "body")
    index.build()
    alice.run(change)
    assert scalar(database_dsn, TRUSTED) == "false"
    alice.run(
        "INSERT INTO docs VALUES (3, 'one text')",
        "UPDATE docs SET content = 'another text' WHERE id = 1",
        "DELETE FROM docs WHERE id = 2",
    )
    sync(database_dsn)
    assert check(database_dsn, "docs").ok
    assert [m.key for m in index.near("one text", max_distance=0)] == [3]
