"""The SQL an index is made of, readable and pinned: ``simindex sql NAME`` / ``Index.sql()``
print what creating the index runs, and that text, run as it is, makes a working index again;
the statements generated for one SimHash and one MinHash design are compared byte for byte
with ``snapshots/*.sql`` (``SIMINDEX_UPDATE_SNAPSHOTS=1`` writes them again; review the diff).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from simindex.cli import main
from simindex.core.spec import IndexSpec, MinHash, SimHash, resolve
from simindex.db.objects import create_statements, render
from simindex.db.source import Source
from simindex.index import create_index, drop_index, get_index

SNAPSHOTS = Path(__file__).parent / "snapshots"

# A fixed source: what describe() would find for ``public.docs (id bigint, body text)``.
SOURCE = Source(
    oid=16384,
    schema="public",
    table="docs",
    key_column="id",
    key_type="bigint",
    text_column="body",
    key_attnum=1,
    text_attnum=2,
    key_position=1,
    text_position=2,
    key_type_id=20,
    key_typmod=-1,
    text_type_id=25,
)

DESIGNS: dict[str, IndexSpec] = {
    "simhash": resolve(SimHash(max_distance=3, num_blocks=4)),
    "minhash": resolve(MinHash()),  # the default: 128 permutations, 15 bands of 7 rows
}

TEXTS = [
    "the quick brown fox jumps over the lazy dog near the river bank today",
    "the quick brown fox jumps over the lazy dog near the river bank tonight",
    "a completely different sentence about databases, indexes and fingerprints",
]


@pytest.mark.parametrize("design", sorted(DESIGNS))
def test_generated_sql_matches_its_snapshot(
    conn: psycopg.Connection[tuple[object, ...]], design: str
) -> None:
    statements = create_statements("simindex", "docs", SOURCE, DESIGNS[design], trusted=True)
    text = render(conn, statements)
    snapshot = SNAPSHOTS / f"{design}.sql"
    if os.environ.get("SIMINDEX_UPDATE_SNAPSHOTS") == "1":
        snapshot.write_text(text, encoding="utf-8", newline="\n")
    assert snapshot.exists(), f"no snapshot {snapshot.name}: run with SIMINDEX_UPDATE_SNAPSHOTS=1"
    expected = snapshot.read_text(encoding="utf-8")
    assert text == expected, (
        f"the SQL generated for the {design} design differs from snapshots/{snapshot.name}: "
        "if the change is meant, run with SIMINDEX_UPDATE_SNAPSHOTS=1 and review the diff"
    )


def test_snapshots_hold_what_each_index_is_made_of() -> None:
    """The pinned text is the whole of an index, readable: no object of it left out."""
    by_key = {"simhash": "near_key", "minhash": "similar_key"}
    for design in DESIGNS:
        text = (SNAPSHOTS / f"{design}.sql").read_text(encoding="utf-8")
        for made in (
            'INSERT INTO "simindex"."indexes"',
            'CREATE TABLE "simindex"."docs_queue"',
            "CREATE POLICY",
            "CREATE INDEX",
            f'CREATE FUNCTION "simindex"."docs_{by_key[design]}_v1"(',
            'CREATE FUNCTION "simindex"."docs_pairs_v1"(',
            'CREATE OR REPLACE FUNCTION "simindex"."docs_trigger_v1"()',
            'CREATE TRIGGER "simindex_docs_insert"',
        ):
            assert made in text, f"{design}.sql has no {made}"
        assert "\n\n\n" not in text and text.endswith(";\n")


def test_each_statement_ends_once_and_runs_as_printed(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    statements = [
        sql.SQL("  SELECT 1\n-- a note after it\n"),
        sql.SQL("SELECT 2;"),
        sql.SQL("SELECT 3"),
    ]
    text = render(conn, statements)
    assert text == "SELECT 1\n-- a note after it\n;\n\nSELECT 2;\n\nSELECT 3;\n"
    cursor = conn.execute(text.encode())
    results = [cursor.fetchone()]
    while cursor.nextset():
        results.append(cursor.fetchone())
    assert results == [(1,), (2,), (3,)]


@pytest.fixture
def docs(database_dsn: str) -> str:
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE docs (id integer PRIMARY KEY, body text)")
        conn.cursor().executemany(
            "INSERT INTO docs VALUES (%s, %s)", list(enumerate(TEXTS, start=1))
        )
    return database_dsn


@pytest.mark.parametrize("method", [SimHash(max_distance=3), MinHash(threshold=0.5)])
def test_printed_sql_makes_the_index_again(docs: str, method: SimHash | MinHash) -> None:
    index = create_index(docs, "docs", "docs", "body", method=method)
    index.build()
    printed = index.sql()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["sql", "docs", "--dsn", docs]) == 0
    assert out.getvalue() == printed
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["sql", "docs", "--dsn", docs, "--json"]) == 0
    assert json.loads(out.getvalue()) == {"name": "docs", "sql": printed}

    drop_index(docs, "docs")
    with psycopg.connect(docs, autocommit=True) as conn:
        conn.execute(printed.encode())  # the text as printed, all of it, nothing else
    again = get_index(docs, "docs")
    assert again.sql() == printed
    again.build()
    found = again.near_key(1) if isinstance(method, SimHash) else again.similar(key=1)
    assert [match.key for match in found] == [2]
    with psycopg.connect(docs, autocommit=True) as conn:
        conn.execute("INSERT INTO docs VALUES (4, %s)", [TEXTS[0] + " again"])
        (queued,) = conn.execute(
            'SELECT (SELECT count(*) FROM "simindex"."docs_queue")'
            ' + (SELECT count(*) FROM "simindex"."docs_inbox")'
        ).fetchone() or (0,)
    assert queued == 1  # the printed triggers queue writes


def test_sql_of_a_missing_index_is_an_error(database_dsn: str) -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["sql", "nothing", "--dsn", database_dsn]) == 1
    assert "no index named 'nothing'" in err.getvalue()
