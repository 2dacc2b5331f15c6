"""What an index answers a role: no more rows than a bound unless asked, at a cost the caller's
own settings govern, and never a key of a row the role could not SELECT (issue 20, findings 4
and 21), on every query path, run as ordinary login roles."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable
from typing import Any

import psycopg
import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.exc import DBAPIError

import simindex
from simindex.core.bits import to_unsigned
from simindex.core.spec import MinHash, SimHash
from simindex.db.answers import DEFAULT_MAX_ROWS
from simindex.errors import KeyNotIndexedError
from simindex.index import create_index
from simindex.ops.pairs import IdenticalGroup
from simindex.sqlalchemy import near as sa_near
from simindex.sqlalchemy import similar as sa_similar
from tests.security.conftest import MakeRole, Role, owned_table, scalar, superuser

COPIES = DEFAULT_MAX_ROWS + 100


@pytest.fixture
def boilerplate(database_dsn: str) -> str:
    """A table of many copies of one text (a disclaimer, say), indexed by SimHash."""
    superuser(
        database_dsn,
        "CREATE TABLE docs (id integer PRIMARY KEY, body text)",
        f"INSERT INTO docs SELECT n, 'the same boilerplate paragraph, copied into every row' "
        f"FROM generate_series(1, {COPIES}) AS n",
    )
    create_index(database_dsn, "docs", "docs", "body").build()
    return database_dsn


def test_a_reader_gets_a_bounded_answer_unless_it_asks_for_every_row(
    boilerplate: str, make_role: MakeRole
) -> None:
    reader = make_role("reader")
    simindex.grant(boilerplate, reader.name, "reader")
    superuser(boilerplate, f"GRANT SELECT ON docs TO {reader.name}")
    for query in (
        "SELECT count(*) FROM simindex.docs_near_key_v1(1)",
        "SELECT count(*) FROM simindex.near_key_v1('docs', 1)",
        "SELECT count(*) FROM simindex.docs_near_v1("
        "(SELECT fingerprint FROM simindex.docs_simhash WHERE key = 1))",
    ):
        assert reader.scalar(query) == DEFAULT_MAX_ROWS, query
    assert reader.scalar("SELECT count(*) FROM simindex.docs_near_key_v1(1, 3, NULL)") == (
        COPIES - 1
    )
    # The Python API's limit=None is still every row.
    assert len(simindex.get_index(reader.dsn, "docs").near_key(1)) == COPIES - 1


def test_pairs_is_not_a_readers_right_and_no_function_sets_its_own_work_mem(
    boilerplate: str, make_role: MakeRole
) -> None:
    reader = make_role("reader")
    simindex.grant(boilerplate, reader.name, "reader")
    superuser(boilerplate, f"GRANT SELECT ON docs TO {reader.name}")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        reader.scalar("SELECT count(*) FROM simindex.docs_pairs_v1()")
    settings = scalar(
        boilerplate,
        "SELECT coalesce(array_agg(p.proname || ': ' || c ORDER BY p.proname), '{}') "
        "FROM pg_proc AS p, unnest(p.proconfig) AS c "
        "WHERE p.pronamespace = 'simindex'::regnamespace AND c !~ '^(search_path|plan_cache_mode"
        "|enable_hashagg|max_parallel_workers_per_gather)='",
    )
    assert settings == []
    # Python's pairs collapses identical rows into groups; it stays a reader's to call.
    found = list(simindex.get_index(reader.dsn, "docs").pairs(groups=True))
    assert [len(group.keys) for group in found if isinstance(group, IdenticalGroup)] == [COPIES]
    assert len(found) == 1


# -- finding 4: a tenant under row-level security, and a reader without SELECT on the table

SECRET = "the launch code of project falcon is four two four two and nobody may know it"
BOILERPLATE = "this message and its attachments are confidential and meant for its addressee"
NEAR_SECRET = "an entirely ordinary note about the weekly team lunch on the second floor today"
ALICE = [4, 5, 6, 7, 8, 9, 10]
# Bob's rows: 1 is the boilerplate alice's 4 and 6 repeat (their cluster is named 1, a key of
# Bob's), 12 the text alice's 5 nearly repeats, 15 his secret.
ROWS = {
    1: ("bob", BOILERPLATE),
    2: ("bob", "bob writes about the budget of the third quarter and its many surprises"),
    3: ("bob", "bob's reminder to renew the office lease before the end of the month"),
    4: ("alice", BOILERPLATE),
    5: ("alice", NEAR_SECRET + " indeed"),
    6: ("alice", BOILERPLATE),
    7: ("alice", "alice drafts the agenda of the board meeting with seven short items"),
    8: ("alice", "alice notes the supplier's new prices for paper, toner and coffee beans"),
    9: ("alice", "alice asks whether the parking garage will be closed on friday evening"),
    10: ("alice", "alice thanks everyone for the farewell party of her old colleague"),
    12: ("bob", NEAR_SECRET),
    15: ("bob", SECRET),
}


def _tenants(dsn: str, make_role: MakeRole, method: SimHash | MinHash) -> dict[str, Role]:
    """The app's table (owned by an ordinary role) with a tenant policy, its index built and
    clustered by a superuser, and the roles of the attack: tenants alice and bob (readers,
    each seeing their own rows) and a reader without SELECT on the table."""
    owner, alice, bob = make_role("app_owner"), make_role("alice"), make_role("bob")
    blind = make_role("blind")
    owned_table(dsn, owner, "CREATE TABLE docs (id integer PRIMARY KEY, tenant name, body text)", 0)
    tenants = {"alice": alice.name, "bob": bob.name}
    with psycopg.connect(owner.dsn, autocommit=True) as conn:
        for key, (tenant, body) in ROWS.items():
            conn.execute("INSERT INTO docs VALUES (%s, %s, %s)", (key, tenants[tenant], body))
        conn.execute("ALTER TABLE docs ENABLE ROW LEVEL SECURITY")
        conn.execute("CREATE POLICY tenant ON docs USING (tenant = current_user)")
        conn.execute(f"GRANT SELECT, INSERT ON docs TO {alice.name}, {bob.name}")
    index = create_index(dsn, "docs", "docs", "body", method=method)
    index.build()
    index.clusters()
    for role in (alice, bob, blind):
        simindex.grant(dsn, role.name, "reader")
    # Bob's later copy of his secret, queued and not yet synced.
    bob.run(f"INSERT INTO docs VALUES (21, current_user, '{SECRET}')")
    return {"alice": alice, "bob": bob, "blind": blind}


def _answers(role: Role, method: SimHash | MinHash, guess: Any) -> list[object]:
    """Every key ``role`` gets from the index, by every query path; a path it may not use
    (permission denied) answers nothing."""
    found: list[object] = []

    def attempt(path: Callable[[], Iterable[object]]) -> None:
        # A key the role may not see is answered as one not indexed.
        with contextlib.suppress(psycopg.errors.InsufficientPrivilege, KeyNotIndexedError):
            found.extend(path())

    index = simindex.get_index(role.dsn, "docs")
    engine = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(role.dsn))
    tables = ["docs_inbox", "docs_queue", "docs_failed", "docs_clusters"]
    if isinstance(method, SimHash):
        tables.append("docs_simhash")
        attempt(lambda: [m.key for m in index.near(SECRET, max_distance=0)])
        attempt(lambda: [m.key for m in index.near(fingerprint=to_unsigned(guess))])
        for key in ROWS:
            attempt(functools.partial(_keys, index.near_key, key))
        attempt(lambda: _rows(role, "SELECT key FROM simindex.docs_near_v1(%s, 0)", guess))
        functions = ["simindex.docs_near_key_v1(%s)", "simindex.near_key_v1('docs', %s)"]
        selectable = sa_near(engine, "docs", SECRET, max_distance=0)
    else:
        tables.append("docs_minhash")
        attempt(lambda: [m.key for m in index.similar(SECRET, verify="estimate")])
        attempt(lambda: [m.key for m in index.similar(SECRET, verify="exact")])
        attempt(
            lambda: _rows(
                role,
                "SELECT key FROM simindex.docs_similar_v1(%s::bit varying, %s, 0.0, 1000, %s)",
                guess.sketch,
                list(guess.band_keys),
                guess.set_hash,
            )
        )
        for key in ROWS:
            attempt(functools.partial(_keys, lambda key: index.similar(key=key), key))
        functions = ["simindex.docs_similar_key_v1(%s)", "simindex.similar_key_v1('docs', %s)"]
        selectable = sa_similar(engine, "docs", SECRET)
    for function in functions:
        for key in ROWS:
            attempt(functools.partial(_rows, role, f"SELECT key FROM {function}", key))
    for table in tables:
        columns = "key, cluster_id" if table == "docs_clusters" else "key"
        attempt(functools.partial(_rows, role, f"SELECT {columns} FROM simindex.{table}"))

    def via_sqlalchemy() -> list[object]:
        with engine.connect() as conn:
            try:
                return [row.key for row in conn.execute(select(selectable))]
            except DBAPIError as exc:
                raise exc.orig from exc  # type: ignore[misc]

    attempt(via_sqlalchemy)
    engine.dispose()
    attempt(lambda: [k for p in index.pairs() for k in (p.left, p.right)])
    attempt(lambda: [k for g in index.pairs(groups=True) for k in _pair_keys(g)])
    attempt(lambda: [k for m in index.cluster_members(min_size=1) for k in (m.cluster_id, m.key)])
    attempt(lambda: [k for s in index.survivors("pairs") for k in (s.cluster_id, s.key)])
    attempt(lambda: _rows(role, "SELECT cluster_id, key FROM simindex.docs_survivors_v1('pairs')"))
    return found


def _keys(query: Callable[[Any], Iterable[Any]], key: object) -> list[object]:
    return [match.key for match in query(key)]


def _pair_keys(found: Any) -> tuple[object, ...]:
    return tuple(found.keys) if hasattr(found, "keys") else (found.left, found.right)


def _rows(role: Role, query: str, *params: object) -> list[object]:
    with psycopg.connect(role.dsn, autocommit=True) as conn:
        return [value for row in conn.execute(query, params or None) for value in row]


@pytest.mark.parametrize("method", [SimHash(), MinHash(threshold=0.5)], ids=["simhash", "minhash"])
def test_no_role_learns_a_key_the_table_would_not_show_it(
    database_dsn: str, make_role: MakeRole, method: SimHash | MinHash
) -> None:
    roles = _tenants(database_dsn, make_role, method)
    index = simindex.get_index(database_dsn, "docs")
    guess = index.fingerprint(SECRET)
    # The attack works on what the index holds: the right guess finds Bob's secret row.
    if isinstance(method, SimHash):
        assert [m.key for m in index.near(SECRET, max_distance=0)] == [15]
    else:
        assert [m.key for m in index.similar(SECRET, verify="estimate")] == [15]
    alice = _answers(roles["alice"], method, guess)
    assert set(alice) <= set(ALICE)
    assert {5, 7, 9} <= set(alice)  # her own rows are answered (the side table, at least)
    bob = _answers(roles["bob"], method, guess)
    assert 15 in bob and set(bob).isdisjoint(ALICE)
    assert _answers(roles["blind"], method, guess) == []
    # The SQL function of a hidden row's key answers as for a key not indexed.
    assert _rows(roles["alice"], "SELECT count(*) FROM simindex.docs_queue") == [0]


def test_the_probe_follows_the_table_through_renames(
    database_dsn: str, make_role: MakeRole
) -> None:
    roles = _tenants(database_dsn, make_role, SimHash())
    alice = roles["alice"]
    superuser(
        database_dsn,
        "ALTER TABLE docs RENAME TO papers",
        "ALTER TABLE papers RENAME COLUMN id TO doc_id",
        "CREATE SCHEMA moved",
        "ALTER TABLE papers SET SCHEMA moved",
        f"GRANT USAGE ON SCHEMA moved TO {alice.name}",
    )
    index = simindex.get_index(alice.dsn, "docs")
    assert [m.key for m in index.near_key(4)] == [6]  # not Bob's 1
    assert _rows(alice, "SELECT key FROM simindex.docs_near_key_v1(4)") == [6]
    assert set(_rows(alice, "SELECT key FROM simindex.docs_simhash")) == set(ALICE)


def test_a_reader_who_sees_every_row_gets_the_owners_answers_by_key(
    database_dsn: str, make_role: MakeRole
) -> None:
    # similar_key_v1 scores its candidates by minhash_similarity_v1 where a policy applies to
    # the caller and by the estimate written out in the plan where none does: the same rows,
    # scores and order. Texts: copies of one text, near copies of it and of each other.
    words = [f"w{i}" for i in range(40)]
    texts = [" ".join(words)] * 4
    texts += [" ".join([*words[:i], "x", *words[i + 1 :]]) for i in range(0, 40, 3)]
    texts += [" ".join([*words[:i], "y", "z", *words[i + 2 :]]) for i in range(0, 38, 5)]
    superuser(database_dsn, "CREATE TABLE docs (id integer PRIMARY KEY, body text)")
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        for key, text in enumerate(texts):
            conn.execute("INSERT INTO docs VALUES (%s, %s)", (key, text))
    create_index(database_dsn, "docs", "docs", "body", method=MinHash(threshold=0.5)).build()
    reader = make_role("reader")
    simindex.grant(database_dsn, reader.name, "reader")
    superuser(database_dsn, f"GRANT SELECT ON docs TO {reader.name}")
    query = "SELECT key, similarity, identical FROM simindex.docs_similar_key_v1(%s, %s, %s)"
    owner_policy = "SELECT row_security_active('simindex.docs_minhash')"
    assert scalar(database_dsn, owner_policy) is False
    assert reader.scalar(owner_policy) is True
    answered = 0
    for key in range(len(texts)):
        for threshold, limit in ((0.5, 1000), (0.7, 3), (0.0, None)):
            with psycopg.connect(database_dsn, autocommit=True) as conn:
                owner = conn.execute(query, (key, threshold, limit)).fetchall()
            with psycopg.connect(reader.dsn, autocommit=True) as conn:
                assert conn.execute(query, (key, threshold, limit)).fetchall() == owner
            answered += len(owner)
    assert answered > 0
