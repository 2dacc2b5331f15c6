"""What an index answers a role: no more rows than a bound unless asked, at a cost the caller's
own settings govern, and never a key of a row the role could not SELECT (issue 20, findings 4
and 21), on every query path, run as ordinary login roles."""

from __future__ import annotations

import psycopg
import pytest

import simindex
from simindex.db.answers import DEFAULT_MAX_ROWS
from simindex.index import create_index
from tests.security.conftest import MakeRole, scalar, superuser

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
        "|enable_hashagg)='",
    )
    assert settings == []
    # Python's pairs collapses identical rows into groups; it stays a reader's to call.
    found = list(simindex.get_index(reader.dsn, "docs").pairs(groups=True))
    assert [len(group.keys) for group in found] == [COPIES]
