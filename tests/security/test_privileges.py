"""Who may do what with simindex: the attacks of issue 12, run as ordinary login roles.

A role with USAGE on simindex's schema (and the TEMP right everyone has) must not become a
superuser, truncate side tables or queue keys through simindex's trigger functions; the owner
of an indexed table must not, by renaming the key or text column and adding one of the old name
whose type casts through a function of theirs; a superuser running ``sync`` must never run that
function either.
"""

from __future__ import annotations

import logging

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import simindex
from simindex import check, sync
from simindex.core.spec import MinHash, SimHash
from simindex.db import privileges
from simindex.db.privileges import OWNER
from simindex.errors import IndexNotReadyError, SourceError
from simindex.index import Index, create_index, drop_index, get_index
from simindex.ops.queue import queue_counts
from simindex.ops.sync_report import SyncReport
from simindex.sqlalchemy import index_changes
from tests.security.conftest import (
    MakeRole,
    drop_event_triggers,
    is_superuser,
    owned_table,
    scalar,
    superuser,
)

DOCS = "CREATE TABLE docs (id integer PRIMARY KEY, body text)"
SIDE_ROWS = "SELECT count(*) FROM simindex.docs_simhash"
QUEUED = (
    "SELECT coalesce(array_agg(DISTINCT key ORDER BY key)::text[], '{}') FROM "
    "(SELECT key FROM simindex.docs_queue UNION ALL SELECT key FROM simindex.docs_inbox) AS e"
)

# A type of the attacker's whose assignment cast to integer tries to make them a superuser and
# says so in a notice if it ever runs. Only TEMP is needed: it all lives in pg_temp.
EVIL_TEMP_TYPE = """
CREATE TYPE pg_temp.evil AS (v integer);
CREATE FUNCTION pg_temp.evil_to_int(pg_temp.evil) RETURNS integer LANGUAGE plpgsql AS $f$
BEGIN
    RAISE NOTICE 'evil cast ran as %', current_user;
    EXECUTE 'ALTER ROLE ' || quote_ident(session_user) || ' SUPERUSER';
    RETURN ($1).v;
END $f$;
CREATE CAST (pg_temp.evil AS integer) WITH FUNCTION pg_temp.evil_to_int(pg_temp.evil)
    AS ASSIGNMENT;
CREATE TEMP TABLE t (id pg_temp.evil, body text);
"""
TRANSITIONS = {
    "INSERT": "REFERENCING NEW TABLE AS new_rows",
    "UPDATE": "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows",
    "DELETE": "REFERENCING OLD TABLE AS old_rows",
    "TRUNCATE": "",
}
WRITES = {
    "INSERT": "INSERT INTO t VALUES (ROW(99), 'injected')",
    "UPDATE": "UPDATE t SET body = 'changed', id = ROW(98)",
    "DELETE": "DELETE FROM t",
    "TRUNCATE": "TRUNCATE t",
}


@pytest.fixture
def index(database_dsn: str) -> Index:
    superuser(database_dsn, DOCS)
    superuser(
        database_dsn,
        "INSERT INTO docs SELECT n, 'the text of row ' || n || ' says ' || (n % 7) || ' things' "
        "FROM generate_series(1, 20) AS n",
    )
    created = create_index(database_dsn, "docs", "docs", "body")
    created.build()
    return created


def notices(conn: psycopg.Connection[tuple[object, ...]]) -> list[str]:
    seen: list[str] = []
    conn.add_notice_handler(lambda diagnostic: seen.append(str(diagnostic.message_primary)))
    return seen


def test_the_trigger_function_cannot_be_attached_to_another_table(
    database_dsn: str, index: Index, make_role: MakeRole
) -> None:
    mallory = make_role("mallory")
    superuser(database_dsn, f"GRANT USAGE ON SCHEMA simindex TO {mallory.name}")
    with psycopg.connect(mallory.dsn, autocommit=True) as conn:
        conn.execute(EVIL_TEMP_TYPE)
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="docs_trigger_v1"):
            conn.execute(
                "CREATE TRIGGER x AFTER INSERT ON t REFERENCING NEW TABLE AS new_rows "
                "FOR EACH STATEMENT EXECUTE FUNCTION simindex.docs_trigger_v1()"
            )
    assert not is_superuser(database_dsn, mallory)


@pytest.mark.parametrize("event", sorted(WRITES))
def test_attached_anyway_it_refuses_every_event_and_runs_nothing_of_the_attackers(
    database_dsn: str, index: Index, make_role: MakeRole, event: str
) -> None:
    # EXECUTE given by mistake: the function still serves its index's table only.
    mallory = make_role("mallory")
    superuser(
        database_dsn,
        f"GRANT USAGE ON SCHEMA simindex TO {mallory.name}",
        f"GRANT EXECUTE ON FUNCTION simindex.docs_trigger_v1() TO {mallory.name}",
    )
    side_rows = scalar(database_dsn, SIDE_ROWS)
    with psycopg.connect(mallory.dsn, autocommit=True) as conn:
        seen = notices(conn)
        conn.execute(EVIL_TEMP_TYPE)
        conn.execute("INSERT INTO t VALUES (ROW(1), 'a row'), (ROW(2), 'another')")
        conn.execute(
            f"CREATE TRIGGER x AFTER {event} ON t {TRANSITIONS[event]} "
            "FOR EACH STATEMENT EXECUTE FUNCTION simindex.docs_trigger_v1()"
        )
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="source table only"):
            conn.execute(WRITES[event])
    assert seen == []
    assert not is_superuser(database_dsn, mallory)
    assert scalar(database_dsn, SIDE_ROWS) == side_rows == 20
    assert scalar(database_dsn, QUEUED) == []


def test_a_row_level_trigger_is_refused(database_dsn: str, index: Index) -> None:
    # An admin's mistake: the function attached to its own table, but per row.
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE TRIGGER simindex_docs_row AFTER INSERT ON docs FOR EACH ROW "
            "EXECUTE FUNCTION simindex.docs_trigger_v1()"
        )
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="FOR EACH STATEMENT"):
            conn.execute("INSERT INTO docs VALUES (500, 'a row')")


def test_everything_simindex_installs_belongs_to_a_role_without_attributes(
    database_dsn: str, index: Index
) -> None:
    owner = scalar(
        database_dsn,
        "SELECT row(rolsuper, rolcanlogin, rolcreaterole, rolcreatedb, rolbypassrls, "
        "rolreplication)::text FROM pg_roles WHERE rolname = %s",
        (OWNER,),
    )
    assert owner == "(f,f,f,f,f,f)"
    owners = scalar(
        database_dsn,
        """
        SELECT array_agg(DISTINCT owner) FROM (
            SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'simindex'
            UNION ALL
            SELECT relowner::regrole::text FROM pg_class
            WHERE relnamespace = 'simindex'::regnamespace
            UNION ALL
            SELECT proowner::regrole::text FROM pg_proc
            WHERE pronamespace = 'simindex'::regnamespace
        ) AS o (owner)
        """,
    )
    assert owners == [OWNER]


def test_every_security_definer_function_is_pinned_and_executable_by_its_owner_only(
    database_dsn: str, index: Index
) -> None:
    with psycopg.connect(database_dsn) as conn:
        rows = conn.execute(
            """
            SELECT p.proname, p.proconfig, coalesce(p.proacl::text[], '{}')
            FROM pg_proc AS p
            WHERE p.pronamespace = 'simindex'::regnamespace AND p.prosecdef
            ORDER BY 1
            """
        ).fetchall()
    found = {name: (config, acl) for name, config, acl in rows}
    assert set(found) == {
        "docs_trigger_v1",
        "docs_index_own_v1",
        "on_alter_table_v1",
        "on_sql_drop_v1",
        "share_index_v1",
        "record_health_v1",
    }
    for config, acl in found.values():
        assert config == ["search_path=pg_catalog, pg_temp"]
        assert acl == [f"{OWNER}={'X'}/{OWNER}"]  # no PUBLIC, nobody else (no writer yet)


# The same attack by the table's owner: a type of theirs whose cast logs who ran it (in a table
# anyone may write, so a run as any role is seen) and tries to make them a superuser.
OWNER_EVIL_TYPES = """
CREATE TABLE public.cast_log (who text);
GRANT INSERT ON public.cast_log TO PUBLIC;
CREATE FUNCTION public.log_and_escalate() RETURNS void LANGUAGE plpgsql AS $f$
BEGIN
    INSERT INTO public.cast_log VALUES (current_user);
    BEGIN
        EXECUTE 'ALTER ROLE ' || quote_ident(session_user) || ' SUPERUSER';
    EXCEPTION WHEN insufficient_privilege THEN
        NULL;
    END;
END $f$;
CREATE TYPE public.evil AS (v integer);
CREATE FUNCTION public.evil_to_int(public.evil) RETURNS integer LANGUAGE plpgsql AS $f$
BEGIN PERFORM public.log_and_escalate(); RETURN ($1).v; END $f$;
CREATE CAST (public.evil AS integer) WITH FUNCTION public.evil_to_int(public.evil) AS IMPLICIT;
CREATE TYPE public.evil_text AS (v text);
CREATE FUNCTION public.evil_to_text(public.evil_text) RETURNS text LANGUAGE plpgsql AS $f$
BEGIN PERFORM public.log_and_escalate(); RETURN ($1).v; END $f$;
CREATE CAST (public.evil_text AS text) WITH FUNCTION public.evil_to_text(public.evil_text)
    AS IMPLICIT;
"""
CAST_LOG = "SELECT coalesce(array_agg(who), '{}') FROM public.cast_log"


_SYMBOLS = {"concat": "||", "ne_text": "<>"}
# Operators of the table owner's for the types simindex's SECURITY DEFINER functions compare
# (text, oid, integer) and its concatenation: found first on a search_path that puts public
# before pg_catalog, each logs who ran it (in OWNER_EVIL_TYPES's log, by an INSERT, which no
# operator of theirs can reach) and then does its work.
SEARCH_PATH_OPERATORS = [
    statement
    for name, left, right, result, body in (
        ("eq_text", "text", "text", "boolean", "$1 OPERATOR(pg_catalog.=) $2"),
        ("eq_oid", "oid", "oid", "boolean", "$1 OPERATOR(pg_catalog.=) $2"),
        ("eq_int", "integer", "integer", "boolean", "$1 OPERATOR(pg_catalog.=) $2"),
        ("concat", "text", "text", "text", "$1 OPERATOR(pg_catalog.||) $2"),
        ("ne_text", "text", "text", "boolean", "$1 OPERATOR(pg_catalog.<>) $2"),
    )
    for statement in (
        f"CREATE FUNCTION public.evil_{name}({left}, {right}) RETURNS {result} LANGUAGE plpgsql "
        f"AS $f$ BEGIN INSERT INTO public.cast_log VALUES (current_user); RETURN {body}; "
        "END $f$",
        f"CREATE OPERATOR public.{_SYMBOLS.get(name, '=')} (LEFTARG = {left}, "
        f"RIGHTARG = {right}, FUNCTION = public.evil_{name})",
    )
]


def test_no_security_definer_function_runs_an_operator_on_the_callers_search_path(
    database_dsn: str, make_role: MakeRole
) -> None:
    # The table's owner writes, alters and drops the indexed table with their operators first
    # on the search_path: the trigger function and both event trigger functions run, as
    # simindex's owner role, and none of them calls an operator of theirs.
    alice = make_role("alice")
    owned_table(database_dsn, alice, DOCS)
    alice.run(OWNER_EVIL_TYPES, *SEARCH_PATH_OPERATORS)
    create_index(database_dsn, "docs", "docs", "body").build()
    # The operators are theirs to use: with public first, plain SQL calls them.
    alice.run("SET search_path = public, pg_catalog", "SELECT 'a'::text = 'a'::text")
    assert scalar(database_dsn, CAST_LOG) == [alice.name]
    superuser(database_dsn, "TRUNCATE public.cast_log")
    alice.run(
        "SET search_path = public, pg_catalog",
        "INSERT INTO public.docs VALUES (100, 'a new text'), (101, 'another new text')",
        "UPDATE public.docs SET body = body OPERATOR(pg_catalog.||) ' (edited)' "
        "WHERE id OPERATOR(pg_catalog.=) 100",
        "DELETE FROM public.docs WHERE id OPERATOR(pg_catalog.=) 101",
        # A deleted key used again before the sweep: the trigger removes its old index rows
        # (READ COMMITTED, then REPEATABLE READ, whose test compares the isolation as text).
        "INSERT INTO public.docs VALUES (101, 'the deleted key used again')",
        "UPDATE public.docs SET id = 102 WHERE id OPERATOR(pg_catalog.=) 101",
        "BEGIN ISOLATION LEVEL REPEATABLE READ",
        "DELETE FROM public.docs WHERE id OPERATOR(pg_catalog.=) 102",
        "INSERT INTO public.docs VALUES (102, 'used again in a repeatable read transaction')",
        "COMMIT",
        "ALTER TABLE public.docs RENAME COLUMN body TO content",
        "ALTER TABLE public.docs ALTER COLUMN content TYPE varchar(500)",
        "DROP TABLE public.docs",
    )
    assert scalar(database_dsn, CAST_LOG) == []
    assert not is_superuser(database_dsn, alice)
    # The event triggers ran and recorded the drop, all the same.
    assert get_index(database_dsn, "docs").info().state == "source_dropped"


@pytest.mark.parametrize("function", ["docs_trigger_v1", "on_sql_drop_v1", "on_alter_table_v1"])
def test_no_role_may_call_a_security_definer_function(
    database_dsn: str, index: Index, make_role: MakeRole, function: str
) -> None:
    # USAGE on the schema, as a reader has: the functions themselves stay out of reach.
    mallory = make_role("mallory")
    superuser(database_dsn, f"GRANT USAGE ON SCHEMA simindex TO {mallory.name}")
    denied = "permission denied for function"
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match=denied):
        mallory.run(f"SELECT simindex.{function}()")


def test_the_table_owner_cannot_escalate_by_renaming_the_key_column(
    database_dsn: str, make_role: MakeRole
) -> None:
    alice = make_role("alice")
    owned_table(database_dsn, alice, DOCS)
    index = create_index(database_dsn, "docs", "docs", "body")
    index.build()
    alice.run(
        OWNER_EVIL_TYPES,
        "ALTER TABLE docs RENAME COLUMN id TO id_old",
        "ALTER TABLE docs ADD COLUMN id public.evil",
        "INSERT INTO docs VALUES (100, 'a new row of text for the index', ROW(7))",
        "UPDATE docs SET body = 'row one is now this', id = ROW(8) WHERE id_old = 1",
        "DELETE FROM docs WHERE id_old = 2",
    )
    assert scalar(database_dsn, QUEUED) == ["1", "100"]  # row 2's rows went with its delete
    report = sync(database_dsn)  # as a superuser, which must not matter
    assert report.indexed == 2
    assert scalar(database_dsn, CAST_LOG) == []
    assert not is_superuser(database_dsn, alice)
    assert [m.key for m in index.near("a new row of text for the index", max_distance=0)] == [100]
    assert check(database_dsn, "docs").ok


@pytest.mark.parametrize(
    "alter", ["ALTER TABLE", "ALTER VIEW", "ALTER MATERIALIZED VIEW", "ALTER FOREIGN TABLE"]
)
def test_the_table_owner_cannot_swap_in_a_key_column_under_any_command_tag(
    database_dsn: str, make_role: MakeRole, alter: str
) -> None:
    """Finding 2: a column of the owner's composite type, there before the index, renamed
    into the key's place by a command the event trigger did not watch: the next write ran its
    assignment cast as simindex's owner role."""
    alice = make_role("alice")
    superuser(
        database_dsn,
        f"GRANT CREATE ON SCHEMA public TO {alice.name}",
        "CREATE EXTENSION IF NOT EXISTS plpgsql",
    )
    alice.run(
        OWNER_EVIL_TYPES,
        "CREATE TABLE docs (id integer PRIMARY KEY, body text, spare public.evil)",
        "INSERT INTO docs SELECT n, 'the text of row ' || n || ' says ' || (n % 7) || ' things', "
        "ROW(n)::public.evil FROM generate_series(1, 20) AS n",
    )
    index = create_index(database_dsn, "docs", "docs", "body")
    index.build()
    alice.run(
        f"{alter} docs RENAME COLUMN id TO id_old",
        f"{alter} docs RENAME COLUMN spare TO id",
        "INSERT INTO docs VALUES (100, 'a new row of text for the index', ROW(7)::public.evil)",
        "UPDATE docs SET body = 'row one is now this', id = ROW(8)::public.evil WHERE id_old = 1",
        "DELETE FROM docs WHERE id_old = 2",
        "TRUNCATE docs",
    )
    sync(database_dsn)  # as a superuser, which must not matter
    assert scalar(database_dsn, CAST_LOG) == []
    assert not is_superuser(database_dsn, alice)


def test_the_table_owner_cannot_escalate_by_changing_the_key_type(
    database_dsn: str, make_role: MakeRole
) -> None:
    alice = make_role("alice")
    owned_table(database_dsn, alice, DOCS)
    index = create_index(database_dsn, "docs", "docs", "body")
    index.build()
    alice.run(
        OWNER_EVIL_TYPES,
        "ALTER TABLE docs ALTER COLUMN id TYPE public.evil USING ROW(id)",
        "INSERT INTO docs VALUES (ROW(100), 'a new row of text for the index')",
        "UPDATE docs SET body = 'row one is now this' WHERE (id).v = 1",
        "DELETE FROM docs WHERE (id).v = 2",
        "TRUNCATE docs",
    )
    assert index.info().state == "needs_rebuild"
    assert "changed type" in sync(database_dsn).broken["docs"]
    assert scalar(database_dsn, CAST_LOG) == []
    assert not is_superuser(database_dsn, alice)


def test_sync_as_a_superuser_never_casts_the_text_with_the_table_owners_function(
    database_dsn: str, make_role: MakeRole
) -> None:
    alice = make_role("alice")
    owned_table(database_dsn, alice, DOCS)
    index = create_index(database_dsn, "docs", "docs", "body")
    index.build()
    alice.run(
        OWNER_EVIL_TYPES,
        "ALTER TABLE docs RENAME COLUMN body TO body_old",
        "ALTER TABLE docs ADD COLUMN body public.evil_text",
        "INSERT INTO docs VALUES (100, 'the real text of row one hundred', ROW('bait'))",
    )
    assert sync(database_dsn).indexed == 1
    assert [m.key for m in index.near("the real text of row one hundred", max_distance=0)] == [100]
    assert check(database_dsn, "docs").ok
    # And when the text column itself becomes such a type: marked, never read.
    alice.run(
        "ALTER TABLE docs DROP COLUMN body",
        "ALTER TABLE docs ALTER COLUMN body_old TYPE public.evil_text USING ROW(body_old)",
        "INSERT INTO docs VALUES (101, ROW('another text'))",
    )
    report = sync(database_dsn)
    assert "changed type" in report.broken["docs"]
    assert index.info().state == "needs_rebuild"
    with pytest.raises(SourceError, match="text column"):
        index.build()
    assert scalar(database_dsn, CAST_LOG) == []
    assert not is_superuser(database_dsn, alice)


# Operators of the table owner's on their key type (a domain): an exact match for the key, so
# a plain `=` or `<` in any statement run with a search_path holding public would call them.
OWNER_EVIL_OPERATORS = """
CREATE FUNCTION public.docid_eq(public.docid, public.docid) RETURNS boolean LANGUAGE plpgsql
AS $f$ BEGIN PERFORM public.log_and_escalate(); RETURN $1::integer = $2::integer; END $f$;
CREATE OPERATOR public.= (
    LEFTARG = public.docid, RIGHTARG = public.docid, FUNCTION = public.docid_eq
);
CREATE FUNCTION public.docid_lt(public.docid, public.docid) RETURNS boolean LANGUAGE plpgsql
AS $f$ BEGIN PERFORM public.log_and_escalate(); RETURN $1::integer < $2::integer; END $f$;
CREATE OPERATOR public.< (
    LEFTARG = public.docid, RIGHTARG = public.docid, FUNCTION = public.docid_lt
);
"""


@pytest.mark.parametrize("method", [SimHash(), MinHash(threshold=0.5)], ids=["simhash", "minhash"])
def test_no_statement_compares_keys_with_the_table_owners_operator(
    database_dsn: str, make_role: MakeRole, method: SimHash | MinHash
) -> None:
    alice = make_role("alice")
    superuser(database_dsn, f"GRANT CREATE ON SCHEMA public TO {alice.name}")
    alice.run("CREATE DOMAIN public.docid AS integer")
    owned_table(database_dsn, alice, "CREATE TABLE docs (id public.docid PRIMARY KEY, body text)")
    alice.run("INSERT INTO docs SELECT id::integer + 100, body FROM docs")  # duplicates, for pairs
    index = create_index(database_dsn, "docs", "docs", "body", method=method)
    index.build()
    alice.run(
        OWNER_EVIL_TYPES,
        OWNER_EVIL_OPERATORS,
        "INSERT INTO docs VALUES (300, 'a new row of text for the index')",
        "UPDATE docs SET body = 'row one is now this' WHERE id::integer = 1",
        "DELETE FROM docs WHERE id::integer = 2",
    )
    # Everything below runs as a superuser whose search_path holds public, where they are.
    assert sync(database_dsn).indexed == 2
    assert check(database_dsn, "docs").ok
    if isinstance(method, SimHash):
        assert [m.key for m in index.near_key(3)] == [103]
        assert list(index.pairs())
    else:
        assert [m.key for m in index.similar(key=3, verify="exact")] == [103]
        assert [m.key for m in index.similar(key=3, verify="estimate")] == [103]
        assert list(index.pairs(verify="exact"))
        assert list(index.pairs(verify="estimate"))
    assert index.clusters().clusters
    assert scalar(database_dsn, CAST_LOG) == []
    assert not is_superuser(database_dsn, alice)


# Domains of the table owner's whose CHECK calls a function of theirs that logs who ran it:
# PostgreSQL runs a domain's check whenever a value is cast to it, so a key or a text that
# simindex cast to the domain, as its owner role or as a superuser's sync, would run it.
OWNER_CHECKED_DOMAINS = """
CREATE FUNCTION public.checked(value anyelement) RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN PERFORM public.log_and_escalate(); RETURN true; END $f$;
CREATE DOMAIN public.checked_id AS integer CHECK (public.checked(VALUE));
CREATE DOMAIN public.checked_text AS text CHECK (public.checked(VALUE));
"""


@pytest.mark.parametrize("method", [SimHash(), MinHash(threshold=0.5)], ids=["simhash", "minhash"])
def test_no_check_of_the_table_owners_domains_runs_as_anyone_but_them(
    database_dsn: str, make_role: MakeRole, method: SimHash | MinHash
) -> None:
    alice = make_role("alice")
    superuser(database_dsn, f"GRANT CREATE ON SCHEMA public TO {alice.name}")
    alice.run(OWNER_EVIL_TYPES, OWNER_CHECKED_DOMAINS)
    owned_table(
        database_dsn,
        alice,
        "CREATE TABLE docs (id public.checked_id PRIMARY KEY, body public.checked_text)",
    )
    index = create_index(database_dsn, "docs", "docs", "body", method=method)
    index.build()
    alice.run(
        "INSERT INTO docs VALUES (100, 'a new row of text for the index')",
        "UPDATE docs SET body = 'row one is now this', id = 101 WHERE id = 1",
        "DELETE FROM docs WHERE id = 2",
        "ALTER TABLE docs RENAME COLUMN body TO content",
        "INSERT INTO docs VALUES (102, 'written after the rename')",
    )
    # Everything below runs as a superuser: the trigger function ran as simindex's owner role.
    assert sync(database_dsn).indexed == 3
    assert check(database_dsn, "docs").ok
    if isinstance(method, SimHash):
        assert [m.key for m in index.near_key(102, max_distance=0)] == []
        assert index.near("written after the rename", max_distance=0)[0].key == 102
    else:
        assert [m.key for m in index.similar("written after the rename")] == [102]
        assert [m.key for m in index.similar(key=102, verify="exact")] == []
    list(index.pairs())
    index.clusters()
    index.build()
    alice.run("TRUNCATE docs", "DROP TABLE docs")
    # Alice's own writes ran her checks as herself; nothing of simindex's ever did.
    assert set(scalar(database_dsn, CAST_LOG)) == {alice.name}
    assert not is_superuser(database_dsn, alice)


def test_create_refuses_a_key_type_whose_comparison_could_reach_the_owners_cast(
    database_dsn: str, make_role: MakeRole
) -> None:
    # An enum of the table owner's with an implicit cast of theirs to integer: pg_catalog's =
    # could mean either, so the key is refused, and nothing of theirs runs while create checks.
    alice = make_role("alice")
    superuser(database_dsn, f"GRANT CREATE ON SCHEMA public TO {alice.name}")
    alice.run(
        OWNER_EVIL_TYPES,
        "CREATE TYPE public.kind AS ENUM ('a', 'b')",
        "CREATE FUNCTION public.kind_to_int(public.kind) RETURNS integer LANGUAGE plpgsql "
        "AS $f$ BEGIN PERFORM public.log_and_escalate(); RETURN 1; END $f$",
        "CREATE CAST (public.kind AS integer) WITH FUNCTION public.kind_to_int(public.kind) "
        "AS IMPLICIT",
    )
    owned_table(
        database_dsn, alice, "CREATE TABLE docs (id public.kind PRIMARY KEY, body text)", rows=0
    )
    with pytest.raises(SourceError, match="= and < operators"):
        create_index(database_dsn, "docs", "docs", "body")
    assert scalar(database_dsn, CAST_LOG) == []
    assert not is_superuser(database_dsn, alice)


def test_an_admin_cannot_create_an_index_whose_key_type_the_owner_role_cannot_use(
    database_dsn: str, make_role: MakeRole
) -> None:
    alice = make_role("alice")
    bob = make_role("bob")
    superuser(database_dsn, f"CREATE SCHEMA types AUTHORIZATION {bob.name}")
    # An enum (a domain would be stored as its base type, which needs no right).
    labels = ", ".join(f"'{n}'" for n in range(1, 21))
    bob.run(
        f"CREATE TYPE types.docid AS ENUM ({labels})",
        f"GRANT USAGE ON SCHEMA types TO {alice.name}",
    )
    owned_table(
        database_dsn, alice, "CREATE TABLE docs (id types.docid PRIMARY KEY, body text)", rows=0
    )
    alice.run(
        "INSERT INTO docs SELECT n::text::types.docid, 'the text of row ' || n "
        "FROM generate_series(1, 20) AS n"
    )
    simindex.grant(database_dsn, alice.name, "admin")
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="GRANT USAGE ON SCHEMA types"):
        create_index(alice.dsn, "docs", "docs", "body")
    bob.run(f"GRANT USAGE ON SCHEMA types TO {OWNER}")
    assert create_index(alice.dsn, "docs", "docs", "body").build().rows == 20
    # A role that may grant it (here a superuser) grants the owner role USAGE, and no more.
    superuser(database_dsn, f"REVOKE USAGE ON SCHEMA types FROM {OWNER}")
    drop_index(database_dsn, "docs")
    create_index(database_dsn, "docs", "docs", "body")
    assert scalar(database_dsn, "SELECT has_schema_privilege(%s, 'types', 'USAGE')", (OWNER,))
    assert not scalar(database_dsn, "SELECT has_schema_privilege(%s, 'types', 'CREATE')", (OWNER,))


def test_without_event_triggers_sync_still_never_reads_a_retyped_text_column(
    database_dsn: str, make_role: MakeRole
) -> None:
    drop_event_triggers(database_dsn)
    alice = make_role("alice")
    owned_table(database_dsn, alice, DOCS)
    index = create_index(database_dsn, "docs", "docs", "body")
    index.build()
    alice.run(
        OWNER_EVIL_TYPES,
        "INSERT INTO docs VALUES (100, 'queued before the change of type')",
        "ALTER TABLE docs ALTER COLUMN body TYPE public.evil_text USING ROW(body)",
    )
    assert scalar(database_dsn, "SELECT state FROM simindex.indexes") == "ready"  # not told
    assert "changed type" in sync(database_dsn).broken["docs"]
    assert index.info().state == "needs_rebuild"
    assert scalar(database_dsn, CAST_LOG) == []
    assert not is_superuser(database_dsn, alice)


def test_create_refuses_a_text_type_whose_cast_a_non_superuser_wrote(
    database_dsn: str, make_role: MakeRole
) -> None:
    alice = make_role("alice")
    owned_table(database_dsn, alice, "CREATE TABLE docs (id integer PRIMARY KEY, body text)")
    # A base type needs a superuser; a domain's casts are ignored. What a non-superuser can
    # make is a cast of a type of theirs, which is never a string type; so the check is proven
    # against a string type whose cast to text an ordinary role owns.
    superuser(
        database_dsn,
        "CREATE FUNCTION public.name_to_text(name) RETURNS text LANGUAGE sql "
        "AS $$ SELECT $1::varchar::text $$",
        f"ALTER FUNCTION public.name_to_text(name) OWNER TO {alice.name}",
        "CREATE TABLE names (id integer PRIMARY KEY, label name)",
    )
    create_index(database_dsn, "names_idx", "names", "label")  # the built-in cast: accepted
    superuser(
        database_dsn,
        "UPDATE pg_cast SET castfunc = 'public.name_to_text'::regproc "
        "WHERE castsource = 'name'::regtype AND casttarget = 'text'::regtype",
    )
    try:
        with pytest.raises(SourceError, match="cast to text"):
            create_index(database_dsn, "names_idx2", "names", "label")
    finally:
        superuser(
            database_dsn,
            "UPDATE pg_cast SET castfunc = 'pg_catalog.text(name)'::regprocedure "
            "WHERE castsource = 'name'::regtype AND casttarget = 'text'::regtype",
        )


# -- the rights a role can be given


def test_an_admin_creates_builds_and_drops_without_being_a_superuser(
    database_dsn: str, make_role: MakeRole
) -> None:
    alice = make_role("alice")
    owned_table(database_dsn, alice, DOCS)
    simindex.grant(database_dsn, alice.name, "admin")
    index = create_index(alice.dsn, "docs", "docs", "body")
    assert index.build().rows == 20
    assert get_index(alice.dsn, "docs").info().state == "ready"
    assert scalar(
        database_dsn,
        "SELECT bool_and(relowner = %s::regrole) FROM pg_class "
        "WHERE relnamespace = 'simindex'::regnamespace AND relname LIKE 'docs%%'",
        (OWNER,),
    )
    alice.run("INSERT INTO docs VALUES (100, 'written by the table owner')")
    drop_index(alice.dsn, "docs")
    alice.run("INSERT INTO docs VALUES (101, 'still writable')")


def test_each_right_allows_its_work_and_no_more(
    database_dsn: str, index: Index, make_role: MakeRole
) -> None:
    app, reader, worker = make_role("app"), make_role("reader"), make_role("worker")
    superuser(database_dsn, f"GRANT ALL ON docs TO {app.name}")
    simindex.grant(database_dsn, reader.name, "reader")
    report = simindex.grant(database_dsn, worker.name, "worker")
    assert report.tables_not_granted == []
    # The app needs no right on simindex to write an indexed table.
    app.run(
        "INSERT INTO docs VALUES (100, 'written by the app, queued by the trigger')",
        "UPDATE docs SET body = 'changed by the app' WHERE id = 1",
        "DELETE FROM docs WHERE id = 2",
    )
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        app.run("SELECT count(*) FROM simindex.docs_queue")
    # The worker drains the queue and checks, and may not change the catalog or drop anything.
    assert sync(worker.dsn).indexed == 2
    assert check(worker.dsn, "docs").ok
    for forbidden in (
        "UPDATE simindex.indexes SET key_type = 'text'",
        "DROP TABLE simindex.docs_queue",
        "TRUNCATE simindex.docs_simhash",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            worker.run(forbidden)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        drop_index(worker.dsn, "docs")
    # The reader queries, from Python and SQL, and writes nothing; the index answers it no
    # more than the table would: without SELECT on the table, nothing.
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="docs"):
        get_index(reader.dsn, "docs").near_key(1)
    superuser(database_dsn, f"GRANT SELECT ON docs TO {reader.name}")
    assert [m.key for m in get_index(reader.dsn, "docs").near_key(1)] == [
        m.key for m in index.near_key(1)
    ]
    assert reader.scalar("SELECT count(*) FROM simindex.near_key_v1('docs', 1)") >= 0
    for forbidden in (
        "DELETE FROM simindex.docs_simhash",
        "INSERT INTO simindex.docs_queue VALUES (12345)",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            reader.run(forbidden)
    assert queue_counts(database_dsn, "docs") == (0, 0)


def test_rights_reach_indexes_made_later(database_dsn: str, make_role: MakeRole) -> None:
    reader = make_role("reader")
    simindex.grant(database_dsn, reader.name, "reader")
    superuser(database_dsn, DOCS, "INSERT INTO docs VALUES (1, 'one text'), (2, 'one text')")
    superuser(database_dsn, f"GRANT SELECT ON docs TO {reader.name}")
    create_index(database_dsn, "docs", "docs", "body").build()
    assert [m.key for m in get_index(reader.dsn, "docs").near_key(1)] == [2]


def test_grant_refuses_an_unknown_role_or_right(database_dsn: str) -> None:
    with pytest.raises(ValueError, match="no role named"):
        simindex.grant(database_dsn, "no_such_role_anywhere", "reader")
    with pytest.raises(ValueError, match="right must be"):
        simindex.grant(database_dsn, "postgres", "owner")  # type: ignore[arg-type]


def test_sync_and_build_warn_when_run_as_a_superuser(
    database_dsn: str, index: Index, caplog: pytest.LogCaptureFixture
) -> None:
    privileges._warned.clear()  # the fixture's own build warned already
    with psycopg.connect(database_dsn) as conn:  # sync warns once a batch went well
        conn.execute("INSERT INTO docs VALUES (500, 'a row written after the build')")
    with caplog.at_level(logging.WARNING, logger="simindex"):
        sync(database_dsn)
        index.build()
    assert [r.getMessage().split(";")[0] for r in caplog.records] == [
        "simindex sync runs as a superuser",
        "simindex build runs as a superuser",
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="simindex"):
        sync(database_dsn)
        index.build()
    assert caplog.records == []  # once per process, database and role


def test_a_superuser_warning_is_not_given_to_an_ordinary_role(
    database_dsn: str, index: Index, make_role: MakeRole, caplog: pytest.LogCaptureFixture
) -> None:
    worker = make_role("worker")
    simindex.grant(database_dsn, worker.name, "worker")
    with caplog.at_level(logging.WARNING, logger="simindex"):
        sync(worker.dsn)
    assert caplog.records == []


def test_queries_of_an_index_whose_table_was_dropped_fail_clearly(
    database_dsn: str, index: Index
) -> None:
    superuser(database_dsn, "DROP TABLE docs")
    with pytest.raises(IndexNotReadyError, match="was dropped"):
        index.near_key(1)
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="was dropped"):
        scalar(database_dsn, "SELECT count(*) FROM simindex.docs_near_key_v1(1)")
    drop_index(database_dsn, "docs")


def test_a_member_of_the_owner_role_migrates_without_a_superuser(
    make_role: MakeRole, empty_database_dsn: str
) -> None:
    # A superuser's part, once: the role exists (the test server has it) and is granted.
    deployer = make_role("deployer")
    dsn = make_conninfo(deployer.dsn, dbname=conninfo_to_dict(empty_database_dsn)["dbname"])
    superuser(
        empty_database_dsn,
        f"GRANT CREATE ON DATABASE {conninfo_to_dict(empty_database_dsn)['dbname']} "
        f"TO {deployer.name}",
        f"GRANT {OWNER} TO {deployer.name}",
        f"GRANT CREATE ON SCHEMA public TO {deployer.name}",
    )
    simindex.migrate(dsn)
    assert scalar(empty_database_dsn, "SELECT count(*) FROM pg_event_trigger") == 0
    owner = scalar(
        empty_database_dsn,
        "SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'simindex'",
    )
    assert owner == OWNER
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(DOCS)
        conn.execute("INSERT INTO docs VALUES (1, 'one text'), (2, 'one text')")
    index = create_index(dsn, "docs", "docs", "body")
    index.build()
    # Drift without event triggers: writes go on, the index says why.
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE docs RENAME COLUMN body TO content")
        conn.execute("INSERT INTO docs VALUES (3, 'one text')")
        conn.execute("ALTER TABLE docs ALTER COLUMN id TYPE bigint")
        conn.execute("INSERT INTO docs VALUES (4, 'one text')")
        conn.execute("DELETE FROM docs WHERE id = 1")
    assert index.info().state == "needs_rebuild"
    index.build()
    assert [m.key for m in index.near_key(2)] == [3, 4]
    drop_index(dsn, "docs")
    superuser(empty_database_dsn, f"DROP OWNED BY {deployer.name}")


def test_a_writer_indexes_its_writes_in_its_transaction_and_no_more(
    database_dsn: str, index: Index, make_role: MakeRole
) -> None:
    writer, plain = make_role("writer"), make_role("plain")
    superuser(database_dsn, f"GRANT ALL ON docs TO {writer.name}, {plain.name}")
    simindex.grant(database_dsn, writer.name, "writer")
    for role in (writer, plain):
        with psycopg.connect(role.dsn) as conn:
            conn.execute(
                "INSERT INTO docs VALUES (%s, 'indexed before the commit, by its writer')",
                (100 if role is writer else 200,),
            )
            taken = index_changes(conn)
        assert taken == (1 if role is writer else 0)  # the plain role's entry is the worker's
    assert queue_counts(database_dsn, "docs") == (1, 0)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        writer.run("UPDATE simindex.indexes SET key_type = 'text'")


def test_no_role_but_the_owner_may_lock_or_update_catalog_rows(
    database_dsn: str, index: Index, make_role: MakeRole
) -> None:
    writer, worker, reader = make_role("writer"), make_role("worker"), make_role("reader")
    simindex.grant(database_dsn, writer.name, "writer")
    simindex.grant(database_dsn, worker.name, "worker")
    simindex.grant(database_dsn, reader.name, "reader")
    for role in (writer, worker, reader):
        for lock in ("UPDATE", "NO KEY UPDATE", "SHARE", "KEY SHARE"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                role.run(f"SELECT name FROM simindex.indexes FOR {lock}")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            role.run("UPDATE simindex.indexes SET updated_at = now()")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        reader.run("SELECT simindex.share_index_v1('docs')")
    # The worker still holds an index for its batches (so builds wait), through the owner's
    # function, and syncs.
    superuser(database_dsn, "INSERT INTO docs VALUES (100, 'a row for the worker')")
    assert sync(worker.dsn).indexed == 1


def test_sync_reports_an_index_held_past_the_limit_as_a_problem(
    database_dsn: str, index: Index, caplog: pytest.LogCaptureFixture
) -> None:
    superuser(database_dsn, "INSERT INTO docs VALUES (100, 'queued while the index is held')")
    with psycopg.connect(database_dsn) as holder:  # an admin's transaction left open
        holder.execute("SELECT 1 FROM simindex.indexes WHERE name = 'docs' FOR UPDATE")
        report = sync(database_dsn)
        assert report.busy == {"docs"} and report.ok  # a build may hold it a while
        with caplog.at_level(logging.ERROR, logger="simindex.ops.sync"):
            report = sync(database_dsn, report=SyncReport(busy_limit=0.0))
        assert "docs" in report.stuck and not report.ok
        assert [r.simindex["event"] for r in caplog.records] == ["index_busy"]  # type: ignore[attr-defined]
        holder.rollback()
    report = sync(database_dsn, report=SyncReport(busy_limit=0.0))
    assert report.ok and report.indexed == 1 and not report.stuck


def test_rights_given_per_index_reach_that_index_alone_and_outlive_its_builds(
    database_dsn: str, index: Index, make_role: MakeRole
) -> None:
    superuser(
        database_dsn,
        "CREATE TABLE pages (id integer PRIMARY KEY, body text)",
        "INSERT INTO pages SELECT n, 'another application''s page ' || n "
        "FROM generate_series(1, 10) AS n",
    )
    pages = create_index(database_dsn, "pages", "pages", "body")
    pages.build()
    writer, reader, worker = make_role("writer"), make_role("reader"), make_role("worker")
    superuser(database_dsn, f"GRANT ALL ON docs TO {writer.name}, {reader.name}")
    simindex.grant(database_dsn, writer.name, "writer", indexes=["docs"])
    simindex.grant(database_dsn, reader.name, "reader", indexes=["docs"])
    assert (
        simindex.grant(database_dsn, worker.name, "worker", indexes=["docs"]).tables_not_granted
        == []
    )
    index.build()  # new side tables: the rights given on the index stay
    index.clusters()
    for forbidden in (
        "DELETE FROM simindex.pages_simhash",
        "DELETE FROM simindex.pages_queue",
        "INSERT INTO simindex.pages_simhash SELECT * FROM simindex.pages_simhash",
        "SELECT count(*) FROM simindex.pages_failed",
        "SELECT simindex.share_index_v1('pages')",  # a hold would make its builds wait
    ):
        for role in (writer, reader, worker):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                role.run(forbidden)
    for role in (writer, worker):
        assert role.scalar("SELECT simindex.share_index_v1('docs')") is True
    with psycopg.connect(writer.dsn) as conn:
        conn.execute("INSERT INTO docs VALUES (100, 'the text of row 1 says 1 things')")
        assert index_changes(conn) == 1
    assert [m.key for m in get_index(reader.dsn, "docs").near_key(1)] == [
        m.key for m in index.near_key(1)
    ]
    assert reader.scalar("SELECT count(*) FROM simindex.docs_clusters") > 0
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        get_index(reader.dsn, "pages").near_key(1)
    superuser(database_dsn, "INSERT INTO docs VALUES (101, 'for the worker')")
    assert sync(worker.dsn, ["docs"]).indexed == 1
    superuser(database_dsn, "INSERT INTO pages VALUES (11, 'not the worker''s')")
    assert "pages" in sync(worker.dsn, ["pages"]).broken
    with pytest.raises(ValueError, match="admin"):
        simindex.grant(database_dsn, writer.name, "admin", indexes=["docs"])
