"""The command line run by a role without the right a command needs: one line that names the
right and the grant that gives it, a non-zero exit, and nothing recorded as broken."""

from __future__ import annotations

import os

import pytest

import simindex
from simindex import sync
from simindex.errors import MissingRightError
from simindex.index import Index, create_index
from simindex.ops.queue import queue_counts
from tests.commands import run_simindex
from tests.security.conftest import MakeRole, scalar, superuser


@pytest.fixture
def index(database_dsn: str) -> Index:
    superuser(database_dsn, "CREATE TABLE docs (id integer PRIMARY KEY, body text)")
    superuser(database_dsn, "INSERT INTO docs VALUES (1, 'one text'), (2, 'another text')")
    created = create_index(database_dsn, "docs", "docs", "body")
    created.build()
    superuser(database_dsn, "INSERT INTO docs VALUES (3, 'a queued text')")
    return created


def test_a_reader_running_sync_is_told_to_get_the_worker_right(
    database_dsn: str, index: Index, make_role: MakeRole
) -> None:
    reader = make_role("reader")
    simindex.grant(database_dsn, reader.name, "reader")
    superuser(database_dsn, f"GRANT SELECT ON docs TO {reader.name}")
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in {"SIMINDEX_DSN", "DATABASE_URL", "SIMINDEX_SCHEMA"}
    }
    result = run_simindex(["sync"], env=env | {"SIMINDEX_DSN": reader.dsn}, timeout=60)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"simindex: error: role {reader.name!r} lacks the worker right that sync needs (it may "
        "not write simindex's queues and tables in schema 'simindex'); an admin gives it with "
        f"`simindex grant {reader.name} --worker` (Python: simindex.grant(engine, "
        f"{reader.name!r}, 'worker')); nothing was changed, no index is broken"
    ]
    assert "broken" not in result.stdout
    # Nothing was recorded: the index is healthy, its queue untouched.
    assert scalar(database_dsn, "SELECT broken FROM simindex.indexes WHERE name = 'docs'") is False
    assert scalar(database_dsn, "SELECT last_error FROM simindex.indexes") is None
    assert queue_counts(database_dsn, "docs") == (1, 0)
    with pytest.raises(MissingRightError, match="lacks the worker right"):
        sync(reader.dsn)
    # With the right, the same role syncs.
    simindex.grant(database_dsn, reader.name, "worker")
    assert sync(reader.dsn).indexed == 1


def test_exact_verification_without_select_on_the_table_names_the_grant(
    database_dsn: str, make_role: MakeRole
) -> None:
    from simindex.core.spec import MinHash
    from simindex.index import get_index

    superuser(database_dsn, "CREATE TABLE notes (id integer PRIMARY KEY, body text)")
    superuser(
        database_dsn,
        "INSERT INTO notes VALUES (1, 'the same words in the same order here'), "
        "(2, 'the same words in the same order here!')",
    )
    create_index(database_dsn, "notes", "notes", "body", method=MinHash(threshold=0.5)).build()
    reader = make_role("reader")
    simindex.grant(database_dsn, reader.name, "reader")
    # The keys, not the texts: answers by the estimate, but exact verification reads texts.
    superuser(database_dsn, f"GRANT SELECT (id) ON notes TO {reader.name}")
    index = get_index(reader.dsn, "notes")
    assert [m.key for m in index.similar(key=1, verify="estimate")] == [2]
    with pytest.raises(MissingRightError) as raised:
        index.similar(key=1)
    assert str(raised.value) == (
        f"exact verification reads the texts of table public.notes, which role "
        f"{reader.name!r} may not read (permission denied for table notes): the table's owner "
        f"gives it with GRANT SELECT ON public.notes TO {reader.name}"
    )
    superuser(database_dsn, f"GRANT SELECT ON notes TO {reader.name}")
    assert [m.key for m in index.similar(key=1)] == [2]


def test_a_reader_prints_the_sql_of_an_index_as_an_admin_would(
    database_dsn: str, index: Index, make_role: MakeRole
) -> None:
    reader = make_role("reader")
    simindex.grant(database_dsn, reader.name, "reader")
    superuser(database_dsn, f"GRANT SELECT ON docs TO {reader.name}")
    # The reader's rights are enough to read it; nothing of it runs.
    assert Index(reader.dsn, "docs").sql() == index.sql()
