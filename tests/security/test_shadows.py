"""No name in a statement simindex sends resolves on a caller's search_path (finding 1).

A table owner with CREATE on ``public`` plants, there, a shadow of every function, aggregate,
window function, operator and type (a domain) that simindex's SQL names: the named blocks of
``simindex/db/sql/*.sql``, the migrations, and every SQL string of the package's Python
source (where the per-index functions are generated). The list is derived from that text, so
a new statement is covered the day it is written. Each shadow copies a ``pg_catalog``
signature exactly, and the roles under test log in with ``search_path = public, pg_catalog``:
public first, so a shadow wins wherever a name is resolved on the session's path, whatever
its types (the exact-type shadows of the finding are planted too, for the default path).
A shadow that runs takes a number from a sequence (which no rollback gives back) and raises.

Every command and API entry point then runs as a superuser, an admin and a worker; the
sequence must not have moved.
"""

from __future__ import annotations

import ast
import re
import subprocess
import threading
import time
from importlib import resources
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo
from sqlalchemy import create_engine, text

import simindex
from simindex import sync
from simindex.core.spec import MinHash, SimHash
from simindex.db.connection import raw_connection
from simindex.db.statements import _blocks
from simindex.errors import KeyNotIndexedError
from simindex.index import create_index, get_index
from simindex.ops.sync_report import SyncReport
from simindex.sqlalchemy import index_changes, near, near_key, similar, similar_key
from tests.commands import run_simindex
from tests.security.conftest import MakeRole, Role, owned_table, scalar, superuser

ROOT = Path(__file__).resolve().parents[2]
HOSTILE_PATH = "-c search_path=public,pg_catalog"
RAN = "SELECT last_value + (CASE WHEN is_called THEN 1 ELSE 0 END) - 1 FROM public.shadow_ran"

# SQL spelled as syntax that calls a function or operator by name.
IMPLIED_FUNCTIONS = {"trim": ("btrim", "ltrim", "rtrim"), "extract": ("date_part", "extract")}
IMPLIED_OPERATORS = ("=", "<>", "<", ">", "<=", ">=", "~~", "~~*", "||")
# Types a shadow written in PL/pgSQL cannot take.
UNWRITABLE = {
    "internal", '"any"', "any", "cstring", "trigger", "event_trigger", "language_handler",
    "fdw_handler", "index_am_handler", "tsm_handler", "table_am_handler", "pg_ddl_command",
    "opaque",
}  # fmt: skip
_CALL = re.compile(r"(?<![\w.\"$])([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_WORD = re.compile(r"(?<![\w.\"$])[A-Za-z_][A-Za-z0-9_]*(?![\w\"])")
_OPERATOR = re.compile(r"[+\-*/<>=~!@#%^&|`?]+")


def simindex_sql() -> list[str]:
    """Every text simindex may send: named blocks, migrations, and the string literals of the
    package's Python source (over-inclusive: a name never sent only adds a shadow)."""
    texts = list(_blocks().values())
    for path in sorted((ROOT / "migrations").rglob("*")):
        if path.suffix in (".sql", ".py"):
            texts.append(path.read_text(encoding="utf-8"))
    package = Path(str(resources.files("simindex")))
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        texts.extend(
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
        )
    return texts


def used_types(conn: psycopg.Connection[tuple[object, ...]]) -> set[str]:
    """pg_catalog's base types whose name is a word of simindex's text (over-inclusive: a
    type named only in a comment adds a shadow). A name the parser reads as a keyword
    (``integer``, ``bigint``, ``boolean``) always means pg_catalog's type; the others (``text``,
    ``regclass``, ``name``, ...) are looked up on the search_path where no path is pinned."""
    words = {word.lower() for text in simindex_sql() for word in _WORD.findall(text)}
    return {
        str(name)
        for (name,) in conn.execute(
            "SELECT typname::text FROM pg_type WHERE typnamespace = 'pg_catalog'::regnamespace "
            "AND typtype = 'b' AND typname::text = ANY(%s)",
            (sorted(words),),
        )
    }


def used_names(conn: psycopg.Connection[tuple[object, ...]]) -> tuple[set[str], set[str]]:
    """(functions, operators) of pg_catalog that simindex's text names unqualified."""
    texts = simindex_sql()
    called = {name.lower() for text in texts for name in _CALL.findall(text)}
    for spelled, names in IMPLIED_FUNCTIONS.items():
        if spelled in called:
            called.update(names)
    symbols = {symbol for text in texts for symbol in _OPERATOR.findall(text)}
    symbols.update(IMPLIED_OPERATORS)
    functions = {
        str(name)
        for (name,) in conn.execute(
            "SELECT DISTINCT proname::text FROM pg_proc "
            "WHERE pronamespace = 'pg_catalog'::regnamespace AND proname::text = ANY(%s)",
            (sorted(called),),
        )
    }
    operators = {
        str(name)
        for (name,) in conn.execute(
            "SELECT DISTINCT oprname::text FROM pg_operator "
            "WHERE oprnamespace = 'pg_catalog'::regnamespace AND oprname::text = ANY(%s)",
            (sorted(symbols),),
        )
    }
    return functions, operators


CREATE_FUNCTION = "CREATE FUNCTION public.{}({}) RETURNS {} LANGUAGE plpgsql AS {}"
SHADOW_BODY = """
BEGIN
    PERFORM pg_catalog.nextval('public.shadow_ran'::pg_catalog.regclass);
    RAISE EXCEPTION 'shadow % ran as %', {label}, pg_catalog.current_user();
END
"""
EXACT_SHADOWS = [
    # The finding's own: exact types beat pg_catalog's polymorphic ones on any path.
    ("FUNCTION", "unnest(integer[])", "SETOF integer"),
    ("FUNCTION", "unnest(text[])", "SETOF text"),
    ("FUNCTION", "unnest(pg_catalog.int2vector)", "SETOF smallint"),
    ("FUNCTION", "unnest(bigint[])", "SETOF bigint"),
    ("FUNCTION", "array_length(integer[], integer)", "integer"),
]


def plant(
    owner: Role, functions: set[str], operators: set[str], type_names: set[str], dsn: str
) -> int:
    """Create the shadows as ``owner``; how many. A type's shadow is a domain over it whose
    check runs the shadow's body: any value cast to it, or stored in a variable declared
    with it, runs it."""
    made = 0
    with psycopg.connect(dsn, autocommit=True) as catalog:
        procs = catalog.execute(
            "SELECT p.oid, p.proname::text, p.prokind::text, "
            "pg_get_function_identity_arguments(p.oid), pg_get_function_result(p.oid), "
            "p.proretset, p.pronargs, format_type(p.prorettype, NULL) "
            "FROM pg_proc AS p WHERE p.pronamespace = 'pg_catalog'::regnamespace "
            "AND p.proname::text = ANY(%s) AND p.prokind IN ('f', 'a', 'w') ORDER BY p.oid",
            (sorted(functions),),
        ).fetchall()
        ops = catalog.execute(
            "SELECT o.oprname::text, format_type(o.oprleft, NULL), format_type(o.oprright, NULL), "
            "format_type(o.oprresult, NULL), o.oprleft = 0 "
            "FROM pg_operator AS o WHERE o.oprnamespace = 'pg_catalog'::regnamespace "
            "AND o.oprname::text = ANY(%s) ORDER BY o.oid",
            (sorted(operators),),
        ).fetchall()
    with psycopg.connect(owner.dsn, autocommit=True) as conn:
        for number, (_oid, name, kind, arguments, result, _set, nargs, rettype) in enumerate(procs):
            types = [part.strip() for part in str(arguments).split(",")] if nargs else []
            if any(_unwritable(t) for t in [*types, str(rettype)]) or "VARIADIC" in str(arguments):
                continue
            label = sql.Literal(f"{name}({arguments})")
            body = SHADOW_BODY.format(label=label.as_string(conn))
            try:
                if kind == "f":
                    conn.execute(
                        sql.SQL(
                            "CREATE FUNCTION public.{}({}) RETURNS {} LANGUAGE plpgsql AS {}"
                        ).format(
                            sql.Identifier(name),
                            sql.SQL(str(arguments)),
                            sql.SQL(str(result)),
                            sql.Literal(body),
                        )
                    )
                else:  # an aggregate, or a window function shadowed by one
                    step = sql.Identifier(f"shadow_step_{number}")
                    state = str(rettype)
                    conn.execute(
                        sql.SQL(
                            "CREATE FUNCTION public.{}({}) RETURNS {} LANGUAGE plpgsql AS {}"
                        ).format(
                            step,
                            sql.SQL(", ".join([state, *types])),
                            sql.SQL(state),
                            sql.Literal(body),
                        )
                    )
                    conn.execute(
                        sql.SQL(
                            "CREATE AGGREGATE public.{}({}) (SFUNC = public.{}, STYPE = {})"
                        ).format(
                            sql.Identifier(name),
                            sql.SQL(str(arguments) if nargs else "*"),
                            step,
                            sql.SQL(state),
                        )
                    )
                made += 1
            except psycopg.errors.Error:
                continue  # a signature PL/pgSQL cannot have (a polymorphic result, ...)
        for number, (name, left, right, result, prefix) in enumerate(ops):
            if any(_unwritable(t) for t in (left, right, result)):
                continue
            function = sql.Identifier(f"shadow_operator_{number}")
            arguments = [right] if prefix else [left, right]
            body = SHADOW_BODY.format(label=sql.Literal(f"operator {name}").as_string(conn))
            try:
                conn.execute(
                    sql.SQL(CREATE_FUNCTION).format(
                        function,
                        sql.SQL(", ".join(arguments)),
                        sql.SQL(str(result)),
                        sql.Literal(body),
                    )
                )
                sides = f"RIGHTARG = {right}" if prefix else f"LEFTARG = {left}, RIGHTARG = {right}"
                conn.execute(
                    sql.SQL("CREATE OPERATOR public.{} ({}, FUNCTION = public.{})").format(
                        sql.SQL(str(name)), sql.SQL(sides), function
                    )
                )
                made += 1
            except psycopg.errors.Error:
                continue
        for _, signature, result in EXACT_SHADOWS:
            body = SHADOW_BODY.format(label=sql.Literal(signature).as_string(conn))
            conn.execute(
                sql.SQL("CREATE FUNCTION public.{} RETURNS {} LANGUAGE plpgsql AS {}").format(
                    sql.SQL(signature), sql.SQL(result), sql.Literal(body)
                )
            )
            made += 1
        body = SHADOW_BODY.format(label=sql.Literal("a type").as_string(conn))
        conn.execute(
            "CREATE FUNCTION public.shadow_type_check() RETURNS boolean "
            f"LANGUAGE plpgsql AS {sql.Literal(body).as_string(conn)}"
        )
        for name in sorted(type_names):
            try:
                conn.execute(
                    sql.SQL("CREATE DOMAIN public.{} AS pg_catalog.{} CHECK ({})").format(
                        sql.Identifier(name),
                        sql.Identifier(name),
                        sql.SQL("public.shadow_type_check()"),
                    )
                )
                made += 1
            except psycopg.errors.Error:
                continue  # a type no domain may be over
        body = SHADOW_BODY.format(label=sql.Literal("integer[] = integer[]").as_string(conn))
        conn.execute(
            "CREATE FUNCTION public.shadow_int_array_eq(integer[], integer[]) RETURNS boolean "
            f"LANGUAGE plpgsql AS {sql.Literal(body).as_string(conn)}"
        )
        conn.execute(
            "CREATE OPERATOR public.= (LEFTARG = integer[], RIGHTARG = integer[], "
            "FUNCTION = public.shadow_int_array_eq)"
        )
    return made + 1


def _unwritable(type_name: str) -> bool:
    return type_name.split(" ")[-1] in UNWRITABLE


def hostile(dsn: str) -> str:
    """``dsn`` logging in with the public schema first on its search_path."""
    return make_conninfo(dsn, options=HOSTILE_PATH)


def cli(*args: str, dsn: str) -> subprocess.CompletedProcess[str]:
    result = run_simindex([*args, "--dsn", dsn], timeout=300)
    assert result.returncode == 0, f"simindex {' '.join(args)}:\n{result.stdout}{result.stderr}"
    return result


@pytest.fixture
def shadowed(database_dsn: str, make_role: MakeRole) -> Role:
    """The app's table of ``app_owner``, and its shadows planted in ``public``."""
    owner = make_role("app_owner")
    owned_table(
        database_dsn, owner, "CREATE TABLE docs (id integer PRIMARY KEY, body text)", rows=40
    )
    owner.run(
        "INSERT INTO docs SELECT n, 'the text of row ' || (n - 100) || ' says ' "
        "|| ((n - 100) % 7) || ' things about ' || ((n - 100) % 5) || ' subjects' "
        "FROM generate_series(101, 110) AS n",
        "CREATE SEQUENCE public.shadow_ran",
        "GRANT USAGE, SELECT ON SEQUENCE public.shadow_ran TO PUBLIC",
    )
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        functions, operators = used_names(conn)
        types = used_types(conn)
    # The derivation finds what the finding's statements used (a sanity check of the regexes).
    assert {"unnest", "array_agg", "first_value", "row_number", "count"} <= functions
    assert {"=", "<", "&", ">>", "||"} <= operators
    assert {"text", "regclass", "name"} <= types
    made = plant(owner, functions, operators, types, database_dsn)
    assert made > 200
    assert scalar(database_dsn, RAN) == 0
    return owner


def assert_no_shadow_ran(database_dsn: str, what: str) -> None:
    assert scalar(database_dsn, RAN) == 0, f"a shadow in public ran during {what}"


def test_the_shadows_run_where_a_statement_is_not_pinned(database_dsn: str, shadowed: Role) -> None:
    """The control: the same statements, sent unpinned on the hostile path, do run them."""
    hostile_session = psycopg.connect(hostile(database_dsn), autocommit=True)
    with hostile_session as conn, pytest.raises(psycopg.errors.RaiseException, match="shadow"):
        conn.execute("SELECT count(*) FROM docs")
    assert scalar(database_dsn, RAN) == 1
    hostile_session = psycopg.connect(hostile(database_dsn), autocommit=True)
    with hostile_session as conn, pytest.raises(psycopg.errors.RaiseException, match="a type"):
        conn.execute("SELECT 'docs'::regclass")
    default_path = psycopg.connect(database_dsn, autocommit=True)
    with default_path as conn, pytest.raises(psycopg.errors.RaiseException, match=r"unnest\("):
        conn.execute("SELECT unnest(ARRAY[1, 2])")


def run_everything(database_dsn: str, admin: str, worker: str, owner: Role, label: str) -> None:
    """Every command and API entry point, as the admin (create, build, queries, pairs,
    clusters, check, repair, drop) and the worker (sync, stats, metrics, check, repair)."""
    names = [f"{label}_sim", f"{label}_min"]
    create_index(admin, names[0], "docs", "body", method=SimHash(max_distance=3))
    assert_no_shadow_ran(database_dsn, "create_index (SimHash)")
    cli("create", names[1], "--table", "docs", "--column", "body", "--method", "minhash",
        dsn=admin)  # fmt: skip
    assert_no_shadow_ran(database_dsn, "simindex create (MinHash)")
    for name in names:
        get_index(admin, name).build()
        assert_no_shadow_ran(database_dsn, f"build {name}")
        cli("build", name, dsn=admin)
        assert_no_shadow_ran(database_dsn, f"simindex build {name}")
    base = 900 if label == "roles" else 950
    owner.run(
        f"INSERT INTO docs VALUES ({base}, 'the text of row 1 says 1 things about 1 subjects')",
        "UPDATE docs SET body = body || ' again' WHERE id = 2",
        f"DELETE FROM docs WHERE id = {base - 890}",
        # Keys used again while the deletes wait for the sweep: the triggers remove their old
        # index rows, under READ COMMITTED and REPEATABLE READ, on the app's search_path.
        f"INSERT INTO docs VALUES ({base - 890}, 'the text of row 10 is back')",
        f"DELETE FROM docs WHERE id = {base - 889}",
        f"UPDATE docs SET id = {base - 889} WHERE id = {base}",
        f"UPDATE docs SET id = {base} WHERE id = {base - 889}",
        "BEGIN ISOLATION LEVEL REPEATABLE READ",
        f"DELETE FROM docs WHERE id = {base - 888}",
        f"INSERT INTO docs VALUES ({base - 888}, 'the text of row 12 is back')",
        "COMMIT",
    )
    assert_no_shadow_ran(database_dsn, "the app's writes")
    report = sync(worker, names)
    assert report.failed == 0
    assert_no_shadow_ran(database_dsn, "sync")
    owner.run(f"INSERT INTO docs VALUES ({base + 1}, 'the text of row 4 says 4 things')")
    cli("sync", dsn=worker)
    assert_no_shadow_ran(database_dsn, "simindex sync")
    # A following worker: its look for waiting entries (sync_pending), then the batch.
    stop, following = threading.Event(), SyncReport()
    options = {"follow": True, "stop": stop, "poll_interval": 0.05, "heartbeat": 600.0}
    thread = threading.Thread(
        target=sync, args=(worker, names), kwargs=options | {"report": following}
    )
    thread.start()
    try:
        time.sleep(0.3)  # its first pass done, it waits and looks
        owner.run(f"INSERT INTO docs VALUES ({base + 2}, 'the text of row 5 says 5 things')")
        deadline = time.monotonic() + 20
        while following.taken < 2 and time.monotonic() < deadline:  # one row, two indexes
            time.sleep(0.05)
        assert following.taken == 2
    finally:
        stop.set()
        thread.join(timeout=30)
    assert_no_shadow_ran(database_dsn, "sync --follow")
    for dsn, role in ((worker, "worker"), (admin, "admin")):
        cli("stats", "--json", dsn=dsn)
        cli("stats", "--prometheus", dsn=dsn)
        assert_no_shadow_ran(database_dsn, f"stats and metrics as the {role}")
        for name in names:
            cli("check", name, "--json", dsn=dsn)
            cli("repair", name, dsn=dsn)
            assert_no_shadow_ran(database_dsn, f"check and repair of {name} as the {role}")
    simhash, minhash = (get_index(admin, name) for name in names)
    assert {101, base} <= {m.key for m in simhash.near_key(1)}
    simhash.near(text="the text of row 1 says 1 things about 1 subjects")
    minhash.similar(key=1)
    minhash.similar(text="the text of row 1 says 1 things about 1 subjects", verify="estimate")
    assert_no_shadow_ran(database_dsn, "near and similar")
    cli("query", names[0], "--key", "1", dsn=admin)
    cli("query", names[1], "the text of row 1 says 1 things", "--show", "body", dsn=admin)
    assert_no_shadow_ran(database_dsn, "simindex query")
    for name in names:
        for method in ("pairs", "leader", "bottom_k"):
            cli("clusters", name, "--method", method, "--json", dsn=admin)
            assert_no_shadow_ran(database_dsn, f"clusters --method {method} of {name}")
        pairs = cli("pairs", name, "--json", dsn=admin)
        assert pairs.stdout.strip()
        assert_no_shadow_ran(database_dsn, f"pairs of {name}")
        list(get_index(admin, name).pairs())
        get_index(admin, name).clusters()
        assert_no_shadow_ran(database_dsn, f"Index.pairs and Index.clusters of {name}")
    cli("drop", *names, dsn=admin)
    assert_no_shadow_ran(database_dsn, "simindex drop")


def test_no_shadow_runs_for_any_role_in_any_entry_point(
    database_dsn: str, shadowed: Role, make_role: MakeRole
) -> None:
    admin, worker = make_role("admin"), make_role("worker")
    simindex.grant(database_dsn, admin.name, "admin")
    simindex.grant(database_dsn, worker.name, "worker")
    # Enabling the triggers ALWAYS takes the table's owner, or a member of it.
    superuser(database_dsn, f'GRANT "{shadowed.name}" TO "{admin.name}"')
    shadowed.run(
        f'GRANT ALL ON docs TO "{admin.name}" WITH GRANT OPTION',
        f'GRANT SELECT ON docs TO "{worker.name}"',
    )
    # Creating an index enables its triggers ALWAYS, which takes the table's owner.
    superuser(database_dsn, f'GRANT "{shadowed.name}" TO "{admin.name}"')
    # As ordinary roles: an admin creates and queries, a worker syncs.
    run_everything(database_dsn, hostile(admin.dsn), hostile(worker.dsn), shadowed, "roles")
    # As a superuser doing everything.
    su = hostile(database_dsn)
    run_everything(database_dsn, su, su, shadowed, "su")
    simindex.migrate(su, schema="simindex_shadowed")
    cli("migrate", "--schema", "simindex_shadowed", dsn=su)
    assert_no_shadow_ran(database_dsn, "migrate")
    superuser(database_dsn, "DROP SCHEMA simindex_shadowed CASCADE")


def test_a_callers_connection_gets_its_own_search_path_back(database_dsn: str) -> None:
    """On the app's own Connection, in its transaction, simindex pins the path for its own
    statements only: the app's next statement resolves names as it did before; an Engine's
    connection goes back to the pool with the path it had."""
    superuser(database_dsn, "CREATE TABLE docs (id integer PRIMARY KEY, body text)")
    create_index(database_dsn, "docs", "docs", "body").build()
    engine = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(database_dsn))
    try:
        with engine.connect() as connection:
            connection.execute(text("SET search_path = public, pg_temp"))
            connection.commit()
            index = get_index(connection, "docs")
            connection.execute(text("INSERT INTO docs VALUES (1, 'one two three four')"))
            assert index_changes(raw_connection(connection)) == 1
            assert connection.execute(text("SHOW search_path")).scalar_one() == "public, pg_temp"
            assert [m.key for m in index.near(text="one two three four")] == [1]
            assert connection.execute(text("SHOW search_path")).scalar_one() == "public, pg_temp"
            connection.commit()
            assert connection.execute(text("SHOW search_path")).scalar_one() == "public, pg_temp"
            with engine.connect() as second:  # the pool's other connection, simindex's path
                second.execute(text("SET search_path = public"))
                second.commit()
            get_index(engine, "docs").stats()
            sync(engine, ["docs"])
            with engine.connect() as again:
                assert again.execute(text("SHOW search_path")).scalar_one() == "public"
    finally:
        engine.dispose()


def test_exact_verification_reads_texts_on_the_hostile_path_and_resolves_nothing_there(
    database_dsn: str, shadowed: Role, make_role: MakeRole
) -> None:
    """similar(key=...) verified exactly, with a near-copy whose text it must read: the
    pipelined BEGIN, source lock and catalog read, then the texts and COMMIT, on a DSN's
    pooled connection and on a caller's Engine, both on the hostile path. The near-copy's
    score below 1 proves its text was read and scored; no shadow runs."""
    admin = make_role("admin")
    simindex.grant(database_dsn, admin.name, "admin")
    superuser(database_dsn, f'GRANT "{shadowed.name}" TO "{admin.name}"')
    shadowed.run(
        f'GRANT ALL ON docs TO "{admin.name}"',
        "INSERT INTO docs VALUES (980, 'the text of row 1 says 1 things about 1 subjects today')",
    )
    dsn = hostile(admin.dsn)
    create_index(dsn, "exact_min", "docs", "body", method=MinHash(threshold=0.5)).build()
    engine = create_engine(
        "postgresql+psycopg://", creator=lambda: psycopg.connect(dsn), use_native_hstore=False
    )
    try:
        for bind in (dsn, engine):
            found = {s.key: s.similarity for s in get_index(bind, "exact_min").similar(key=1)}
            assert 0.5 <= found[980] < 1.0
            assert_no_shadow_ran(database_dsn, f"exact verification on {type(bind).__name__}")
    finally:
        engine.dispose()


def test_a_query_on_a_callers_connection_as_it_is_resolves_nothing_there(
    database_dsn: str, shadowed: Role, make_role: MakeRole
) -> None:
    """A query by key, by text or by fingerprint (verified by the estimate) sends its
    statements on an Engine's connection, or in a Connection's transaction, without pinning
    the search_path (no round trips for it): on the hostile path, from the first query (which
    reads the catalog entry pinned) to the ones after it, a key not indexed and a key of a
    wrong type, no shadow runs."""
    admin = make_role("admin")
    simindex.grant(database_dsn, admin.name, "admin")
    superuser(database_dsn, f'GRANT "{shadowed.name}" TO "{admin.name}"')
    shadowed.run(f'GRANT ALL ON docs TO "{admin.name}"')
    dsn = hostile(admin.dsn)
    create_index(dsn, "by_key_sim", "docs", "body", method=SimHash(max_distance=3)).build()
    create_index(dsn, "by_key_min", "docs", "body", method=MinHash(threshold=0.5)).build()
    shadowed.run("INSERT INTO docs VALUES (990, 'a row written after the builds, not synced')")
    # No hstore lookup on connect: the dialect's own query resolves names on the session's path.
    engine = create_engine(
        "postgresql+psycopg://", creator=lambda: psycopg.connect(dsn), use_native_hstore=False
    )
    try:
        with engine.connect() as connection:
            for bind in (engine, connection):
                simhash, minhash = get_index(bind, "by_key_sim"), get_index(bind, "by_key_min")
                for _ in range(3):  # the first reads the entry; psycopg prepares them all
                    assert {101} <= {m.key for m in simhash.near_key(1)}
                    assert {101} <= {s.key for s in minhash.similar(key=1, verify="estimate")}
                    with pytest.raises(KeyNotIndexedError, match="queued"):
                        simhash.near_key(990)
                    with pytest.raises(KeyNotIndexedError, match="queued"):
                        minhash.similar(key=990, verify="estimate")
                    said = "the text of row 1 says 1 things about 1 subjects"
                    assert 101 in {m.key for m in simhash.near(said)}
                    fingerprint = simhash.fingerprint(said)
                    assert isinstance(fingerprint, int)
                    assert 101 in {m.key for m in simhash.near(fingerprint=fingerprint)}
                    assert 101 in {s.key for s in minhash.similar(said, verify="estimate")}
                    # The selectables' checks of the index (their kept entries).
                    near(bind, "by_key_sim", said)
                    near_key(bind, "by_key_sim", 1)
                    similar(bind, "by_key_min", said)
                    similar_key(bind, "by_key_min", 1)
                    assert_no_shadow_ran(database_dsn, f"a query on {type(bind).__name__}")
                connection.commit()
            with pytest.raises(ValueError, match="bad key"):  # in the caller's transaction
                simhash.near_key("not an integer")
            connection.rollback()
            assert connection.execute(text("SHOW search_path")).scalar_one() == "public,pg_catalog"
    finally:
        engine.dispose()
    assert_no_shadow_ran(database_dsn, "a query on a caller's connection")


def test_a_reader_under_row_level_security_resolves_nothing_on_its_path(
    database_dsn: str, shadowed: Role, make_role: MakeRole
) -> None:
    """A reader whose answers pass through the owner's policy takes other plans than an admin
    (the leakproof filters, the probes of the source as the reader sees it): every query
    function through SQL and every query of the Python API, on the hostile path, runs no
    shadow, and answers only rows the policy shows."""
    shadowed.run(
        "ALTER TABLE docs ENABLE ROW LEVEL SECURITY",
        "CREATE POLICY odd ON docs USING (id OPERATOR(pg_catalog.%) 2 OPERATOR(pg_catalog.=) 1)",
    )
    reader = make_role("reader")
    shadowed.run(f'GRANT SELECT ON docs TO "{reader.name}"')
    create_index(database_dsn, "rls_sim", "docs", "body", method=SimHash(max_distance=3)).build()
    create_index(database_dsn, "rls_min", "docs", "body", method=MinHash(threshold=0.5)).build()
    simindex.grant(database_dsn, reader.name, "reader")
    said = "the text of row 1 says 1 things about 1 subjects"
    queries = (
        "SELECT key FROM simindex.rls_sim_near_key_v1(1)",
        "SELECT key FROM simindex.near_key_v1('rls_sim', 1)",
        "SELECT key FROM simindex.rls_sim_near_v1("
        "(SELECT fingerprint FROM simindex.rls_sim_simhash WHERE key OPERATOR(pg_catalog.=) 1))",
        "SELECT key FROM simindex.rls_min_similar_key_v1(1)",
    )
    found: set[int] = set()
    with psycopg.connect(hostile(reader.dsn), autocommit=True) as conn:
        for _ in range(3):  # the later calls run the plans the first ones cached
            for query in queries:
                keys = [int(key) for (key,) in conn.execute(query)]
                assert keys, query
                found.update(keys)
    assert_no_shadow_ran(database_dsn, "the query functions as a reader")
    simhash, minhash = (get_index(hostile(reader.dsn), name) for name in ("rls_sim", "rls_min"))
    found.update(m.key for m in simhash.near_key(1))
    found.update(m.key for m in simhash.near(text=said))
    found.update(s.key for s in minhash.similar(key=1))
    found.update(s.key for s in minhash.similar(key=1, verify="estimate"))
    found.update(s.key for s in minhash.similar(said))
    cli("query", "rls_min", said, "--show", "body", dsn=hostile(reader.dsn))
    assert_no_shadow_ran(database_dsn, "the Python API and simindex query as a reader")
    assert found and all(key % 2 == 1 for key in found), sorted(found)
