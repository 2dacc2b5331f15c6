"""What the SQL functions do with NULL and out-of-range arguments.

Today's behaviour is pinned where it is sane: a bad limit is SQLSTATE 22023 with a sentence, an
unknown index 42704, a NULL or unknown key no rows (as ``WHERE key = NULL`` would); nonsense
(a NULL index name, a threshold outside [0, 1], a sketch of the wrong length) is 22023.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from simindex.core.spec import MinHash, SimHash
from simindex.index import create_index

# The stored form: the set hash, one band key a column (b0, b1, ...) and the sketch, in one row.
SKETCH = "(SELECT sketch FROM simindex.notes_minhash WHERE key = 1)"
BANDS = (
    "(SELECT array_agg(b.value ORDER BY b.band) FROM simindex.notes_minhash AS m, "
    "LATERAL (SELECT substr(j.key, 2)::integer, j.value::integer FROM jsonb_each_text("
    "to_jsonb(m) - 'key' - 'sketch' - 'set_hash') AS j) AS b(band, value) WHERE m.key = 1)"
)


@pytest.fixture
def conn(database_dsn: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """A SimHash index ``docs`` and a MinHash index ``notes`` of the same 20 rows (many
    near-duplicates), the SimHash clusters made; a connection in autocommit."""
    with psycopg.connect(database_dsn) as setup:
        setup.execute("CREATE TABLE documents (id integer PRIMARY KEY, body text)")
        setup.execute(
            "INSERT INTO documents SELECT g, 'some words here and there ' || (g % 3) "
            "FROM generate_series(1, 20) AS g"
        )
    docs = create_index(database_dsn, "docs", "documents", "body", method=SimHash(3))
    docs.build()
    docs.clusters()
    create_index(database_dsn, "notes", "documents", "body", method=MinHash(0.5)).build()
    with psycopg.connect(database_dsn, autocommit=True) as connection:
        yield connection


def rows(conn: psycopg.Connection[tuple[object, ...]], query: str) -> int:
    return len(conn.execute(query).fetchall())


SANE_ERRORS = [
    ("docs_near_v1(0, NULL)", "22023", "max_distance must be from 0 to 3, got <NULL>"),
    ("docs_near_v1(0, -1)", "22023", "max_distance must be from 0 to 3, got -1"),
    ("docs_near_v1(0, 4)", "22023", "max_distance must be from 0 to 3, got 4"),
    ("docs_near_key_v1(1, NULL)", "22023", "got <NULL>"),
    ("docs_near_key_v1(1, -1)", "22023", "got -1"),
    ("docs_near_key_v1(1, 4)", "22023", "got 4"),
    ("docs_pairs_v1(NULL)", "22023", "max_distance must be from 0 to 3, got <NULL>"),
    ("docs_pairs_v1(-1)", "22023", "got -1"),
    ("docs_pairs_v1(4)", "22023", "got 4"),
    ("notes_pairs_v1(NULL)", "22023", "threshold must be from 0 to 1, got <NULL>"),
    ("notes_pairs_v1('NaN')", "22023", "got NaN"),
    ("notes_pairs_v1(1.5)", "22023", "got 1.5"),
    ("notes_pairs_v1(-0.1)", "22023", "got -0.1"),
    ("near_key_v1('nothing', 1)", "42704", "no simindex index named 'nothing'"),
    ("near_key_v1('notes', 1)", "22023", "is a MinHash index: use similar_key_v1"),
    ("near_key_v1('docs', 1, -1)", "22023", "got -1"),
    ("near_key_v1('docs', 1, 4)", "22023", "got 4"),
    ("similar_key_v1('nothing', 1)", "42704", "no simindex index named 'nothing'"),
    ("similar_key_v1('docs', 1)", "22023", "is a SimHash index: use near_key_v1"),
    ("docs_survivors_v1(NULL)", "22023", "clustering must be pairs, .*got NULL"),
    ("docs_survivors_v1('pairs', NULL)", "22023", "prefer must be smallest_key, .*got NULL"),
    ("docs_survivors_v1('pairs', 'best')", "22023", "got 'best'"),
    ("docs_survivors_v1('pairs', 'newest:')", "22023", "got 'newest:'"),
]

SANE_ANSWERS = [
    ("docs_near_v1(NULL)", 0),  # no fingerprint, no neighbours
    ("docs_near_key_v1(NULL)", 0),  # as WHERE key = NULL
    ("docs_near_key_v1(999)", 0),  # a key not indexed
    ("near_key_v1('docs', NULL::integer)", 0),
    ("near_key_v1('docs', 1, NULL)", 6),  # NULL: the index's own max_distance
    ("similar_key_v1('notes', NULL::integer)", 0),
    ("notes_similar_key_v1(NULL)", 0),
    ("similar_key_v1('notes', 1, 1)", 6),  # the identical copies of row 1
]
# NULL or no threshold: the index's own, 0.5 (what its estimate answers on these four-shingle
# texts, J = 0.6 to the other two groups, is the estimate's business, not this test's).
SAME_AS_OWN_THRESHOLD = (
    "similar_key_v1('notes', 1, NULL)",
    "notes_similar_key_v1(1)",
    "notes_similar_key_v1(1, max_rows => NULL)",
)


def test_sane_answers_to_bad_arguments_are_kept(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    for call, count in SANE_ANSWERS:
        assert rows(conn, f"SELECT * FROM simindex.{call}") == count, call
    own = rows(conn, "SELECT * FROM simindex.similar_key_v1('notes', 1, 0.5)")
    assert own >= 6
    for call in SAME_AS_OWN_THRESHOLD:
        assert rows(conn, f"SELECT * FROM simindex.{call}") == own, call
    for call, sqlstate, message in SANE_ERRORS:
        with pytest.raises(psycopg.Error, match=message) as raised:
            conn.execute(f"SELECT * FROM simindex.{call}")
        assert raised.value.sqlstate == sqlstate, call


NONSENSE = {
    # Once "RAISE statement option cannot be null" (22004), not a sentence about index_name.
    "near_key_v1 NULL name": "near_key_v1(NULL, 1)",
    "similar_key_v1 NULL name": "similar_key_v1(NULL, 1)",
    # Thresholds outside [0, 1] (or NaN, or NULL where no default applies) once answered rows
    # or nothing instead of an error, unlike pairs_v1's and near_v1's limits.
    "similar_key_v1 NaN": "similar_key_v1('notes', 1, 'NaN')",
    "similar_key_v1 1.5": "similar_key_v1('notes', 1, 1.5)",
    "similar_key_v1 -1": "similar_key_v1('notes', 1, -1)",
    "notes_similar_key_v1 NaN": "notes_similar_key_v1(1, 'NaN')",
    "notes_similar_key_v1 1.5": "notes_similar_key_v1(1, 1.5)",
    "notes_similar_key_v1 -1": "notes_similar_key_v1(1, -1)",
    "notes_similar_key_v1 NULL": "notes_similar_key_v1(1, NULL)",
    # max_rows 0 once answered nothing; a key not indexed is refused all the same.
    "notes_similar_key_v1 max_rows 0": "notes_similar_key_v1(1, max_rows => 0)",
    "notes_similar_key_v1 max_rows 0, no row": "notes_similar_key_v1(999, max_rows => 0)",
    "notes_similar_v1 2": f"notes_similar_v1({SKETCH}, {BANDS}, 2)",
    "notes_similar_v1 NULL": f"notes_similar_v1({SKETCH}, {BANDS}, NULL)",
    # A sketch or band list of the wrong length was once compared as if it were right.
    "notes_similar_v1 short sketch": f"notes_similar_v1(substring({SKETCH} for 64), {BANDS})",
    "notes_similar_v1 short bands": f"notes_similar_v1({SKETCH}, {BANDS}[1:2])",
}


@pytest.mark.parametrize("call", list(NONSENSE.values()), ids=list(NONSENSE))
def test_nonsense_arguments_are_refused(
    conn: psycopg.Connection[tuple[object, ...]], call: str
) -> None:
    with pytest.raises(psycopg.Error) as raised:
        conn.execute(f"SELECT * FROM simindex.{call}").fetchall()
    assert raised.value.sqlstate == "22023"
