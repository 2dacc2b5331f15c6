"""Keys of any scalar type with a btree operator class, end to end: create, build, queries in
Python and SQL (typed per-index functions and the dispatchers), pairs, clusters, survivors,
sync, check, the SQLAlchemy selectables and drop; nullable and non-scalar keys are refused."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from sqlalchemy import create_engine, select

import simindex.sqlalchemy
from simindex import errors
from simindex.check import check
from simindex.core.spec import Method, MinHash, SimHash
from simindex.index import Index, create_index
from simindex.sync import sync

# Texts of the rows, in key order: rows 0-2 are copies, rows 3-4 are copies, row 5 is alone.
_GROUP_A = " ".join(f"alpha{i}" for i in range(40))
_GROUP_B = " ".join(f"beta{i}" for i in range(40))
_ALONE = " ".join(f"gamma{i}" for i in range(40))
TEXTS = [_GROUP_A, _GROUP_A, _GROUP_A, _GROUP_B, _GROUP_B, _ALONE]


@dataclass(frozen=True)
class KeyType:
    sql_type: str
    """The key column's type, as the test's DDL names it."""
    values: tuple[str, ...]
    """Seven keys as SQL literals, in the type's sort order (the last one is added by sync)."""
    setup: str = ""

    def __str__(self) -> str:
        return self.sql_type


KEY_TYPES = [
    KeyType("char(5)", ("'a1'", "'a2'", "'a3'", "'b1'", "'b2'", "'c1'", "'d1'")),
    KeyType("varchar(12)", ("'a-1'", "'a-2'", "'a-3'", "'b-1'", "'b-2'", "'c-1'", "'d-1'")),
    KeyType("text", ("'a 1'", "'a 2'", "'a 3'", "'b 1'", "'b 2'", "'c 1'", "'d 1'")),
    KeyType("numeric(10,2)", ("1.25", "1.5", "2", "10.75", "11", "12.01", "99.99")),
    KeyType(
        "uuid",
        tuple(f"'00000000-0000-0000-0000-00000000000{i}'" for i in range(1, 8)),
    ),
    KeyType(
        "ext.citext",
        ("'Ab'", "'aC'", "'AD'", "'bA'", "'Bb'", "'cA'", "'dA'"),
        "CREATE SCHEMA ext; CREATE EXTENSION citext SCHEMA ext",
    ),
    KeyType(
        "public.docid",
        ("'d1'", "'d2'", "'d3'", "'d4'", "'d5'", "'d6'", "'d7'"),
        "CREATE DOMAIN public.docid AS text CHECK (VALUE LIKE 'd_')",
    ),
    KeyType(
        '"Odd Schema"."Doc ""Id"""',
        ("1", "2", "3", "40", "41", "50", "60"),
        'CREATE SCHEMA "Odd Schema"; '
        'CREATE DOMAIN "Odd Schema"."Doc ""Id""" AS bigint CHECK (VALUE > 0)',
    ),
]
MINHASH_KEY_TYPES = [KEY_TYPES[0], KEY_TYPES[3], KEY_TYPES[5], KEY_TYPES[6], KEY_TYPES[7]]


# The type of s.id under any domain (the tests' domains are one level deep).
STORED_TYPE = (
    "(SELECT CASE t.typtype WHEN 'd' THEN t.typbasetype ELSE t.oid END FROM pg_type AS t "
    "WHERE t.oid = pg_typeof(s.id))"
)


def _source(dsn: str, key_type: KeyType) -> list[Any]:
    """The table ``items (id <type> PRIMARY KEY, body text)`` with the first six keys; its
    keys as the driver reads them, in key order."""
    with psycopg.connect(dsn) as conn:
        if key_type.setup:
            conn.execute(key_type.setup)
        conn.execute(f"CREATE TABLE items (id {key_type.sql_type} PRIMARY KEY, body text)")
        for value, text in zip(key_type.values, TEXTS, strict=False):
            conn.execute(f"INSERT INTO items VALUES ({value}, %s)", [text])
        return [key for (key,) in conn.execute("SELECT id FROM items ORDER BY id")]


def _texts(conn: psycopg.Connection[Any], query: str, *params: Any) -> list[str]:
    return [str(value) for (value,) in conn.execute(query, params)]


def _end_to_end(dsn: str, key_type: KeyType, method: Method) -> None:
    keys = _source(dsn, key_type)
    minhash = isinstance(method, MinHash)
    index = create_index(dsn, "items_k", "items", "body", method=method)
    assert index.build().rows == 6

    def neighbours(key: Any) -> set[Any]:
        if minhash:
            return {found.key for found in index.similar(key=key)}
        return {found.key for found in index.near_key(key)}

    assert neighbours(keys[0]) == {keys[1], keys[2]}
    assert neighbours(keys[3]) == {keys[4]}
    by_text = index.similar(_GROUP_B) if minhash else index.near(_GROUP_B)
    assert {found.key for found in by_text} == {keys[3], keys[4]}

    function, kind = ("similar_key", "similar_key_v1") if minhash else ("near_key", "near_key_v1")
    # An index's own functions return keys in the key column's type; a domain's, in its base
    # type (never the domain, whose CHECK is its owner's code). The dispatching function
    # returns the type of the key it is given (its caller's choice).
    with psycopg.connect(dsn) as conn:
        as_text = _texts(conn, "SELECT id::text AS shown FROM items ORDER BY id")
        typed = conn.execute(
            f"SELECT n.key::text, pg_typeof(n.key) = {STORED_TYPE} "
            f"FROM items AS s, simindex.items_k_{function}_v1(s.id) AS n "
            "WHERE s.id = (SELECT id FROM items ORDER BY id LIMIT 1) ORDER BY n.key"
        ).fetchall()
        dispatched = conn.execute(
            "SELECT n.key::text, pg_typeof(n.key) = pg_typeof(s.id) "
            f"FROM items AS s, simindex.{kind}('items_k', s.id) AS n "
            "WHERE s.id = (SELECT id FROM items ORDER BY id LIMIT 1) ORDER BY n.key"
        ).fetchall()
        # A key typed as text on the caller's side reaches the index in the key's own type.
        from_text = _texts(
            conn,
            f"SELECT key::text FROM simindex.{kind}('items_k', %s::text) ORDER BY 1",
            as_text[3],
        )
        paired = conn.execute(
            "SELECT left_key::text, right_key::text FROM simindex.items_k_pairs_v1()"
        ).fetchall()
    assert typed == dispatched == [(as_text[1], True), (as_text[2], True)]
    assert from_text == [as_text[4]]
    expected_pairs = [(0, 1), (0, 2), (1, 2), (3, 4)]
    # Each pair once; which key is "left" follows the operator "<" found for the key type,
    # which for an extension's type outside the search_path is its implicit cast's (citext:
    # text's), so compare unordered pairs.
    assert len(paired) == len(expected_pairs)
    assert set(map(frozenset, paired)) == {
        frozenset((as_text[a], as_text[b])) for a, b in expected_pairs
    }
    found_pairs = [frozenset((pair.left, pair.right)) for pair in index.pairs()]
    assert len(found_pairs) == len(expected_pairs)
    assert set(found_pairs) == {frozenset((keys[a], keys[b])) for a, b in expected_pairs}

    report = index.clusters()
    assert (report.rows, report.clusters) == (6, 3)
    members = {(member.cluster_id, member.key) for member in index.cluster_members()}
    assert members == {(keys[0], keys[i]) for i in range(3)} | {(keys[3], keys[i]) for i in (3, 4)}
    kept = {row.key for row in index.survivors("pairs", prefer="largest_key") if row.survivor}
    assert kept == {keys[2], keys[4]}
    with psycopg.connect(dsn) as conn:
        survivors = _texts(
            conn,
            "SELECT key::text FROM simindex.items_k_survivors_v1('pairs', 'smallest_key') "
            "WHERE survivor ORDER BY key",
        )
    assert survivors == [as_text[0], as_text[3]]

    with psycopg.connect(dsn) as conn:
        conn.execute(f"INSERT INTO items VALUES ({key_type.values[6]}, %s)", [_ALONE])
        conn.execute("UPDATE items SET body = %s WHERE id = %s", [_GROUP_B, keys[2]])
        conn.execute("DELETE FROM items WHERE id = %s", [keys[4]])
        new_key = conn.execute(f"SELECT id FROM items WHERE id = {key_type.values[6]}").fetchone()[
            0
        ]  # type: ignore[index]
    sync_report = sync(dsn, ["items_k"])
    assert sync_report.failed == 0
    assert neighbours(new_key) == {keys[5]}
    assert neighbours(keys[3]) == {keys[2]}
    assert neighbours(keys[0]) == {keys[1]}
    assert check(dsn, "items_k").ok

    engine = create_engine("postgresql+psycopg://", creator=lambda: psycopg.connect(dsn))
    try:
        selectable = (
            simindex.sqlalchemy.similar_key(engine, "items_k", keys[0])
            if minhash
            else simindex.sqlalchemy.near_key(engine, "items_k", keys[0])
        )
        with engine.connect() as connection:
            found = connection.execute(select(selectable.c.key)).scalars().all()
    finally:
        engine.dispose()
    assert found == [keys[1]]

    index.drop()
    with psycopg.connect(dsn) as conn:
        left = conn.execute(
            "SELECT count(*) FROM pg_catalog.pg_class AS c "
            "JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'simindex' AND c.relname LIKE 'items\\_k\\_%'"
        ).fetchone()
    assert left == (0,)


@pytest.mark.parametrize("key_type", KEY_TYPES, ids=str)
def test_simhash_key_types(database_dsn: str, key_type: KeyType) -> None:
    _end_to_end(database_dsn, key_type, SimHash(max_distance=3))


@pytest.mark.parametrize("key_type", MINHASH_KEY_TYPES, ids=str)
def test_minhash_key_types(database_dsn: str, key_type: KeyType) -> None:
    _end_to_end(database_dsn, key_type, MinHash(threshold=0.8))


def test_the_catalog_names_key_types_by_schema_and_typmod(database_dsn: str) -> None:
    for key_type in (KEY_TYPES[0], KEY_TYPES[5], KEY_TYPES[7]):
        with psycopg.connect(database_dsn) as conn:
            conn.execute("DROP TABLE IF EXISTS items")
        _source(database_dsn, key_type)
        index = create_index(database_dsn, "items_k", "items", "body")
        assert (
            index.info().source.key_type
            == {
                "char(5)": "character(5)",
                "ext.citext": "ext.citext",
                '"Odd Schema"."Doc ""Id"""': "bigint",  # a domain: its base type
            }[key_type.sql_type]
        )
        index.drop()
    # A domain over a domain over varchar(12): the base type with the typmod it was given.
    with psycopg.connect(database_dsn) as conn:
        conn.execute("DROP TABLE items")
        conn.execute("CREATE DOMAIN public.code AS varchar(12)")
        conn.execute("CREATE DOMAIN public.short_code AS public.code CHECK (length(VALUE) < 9)")
        conn.execute("CREATE TABLE items (id public.short_code PRIMARY KEY, body text)")
    index = create_index(database_dsn, "items_k", "items", "body")
    assert index.info().source.key_type == "character varying(12)"


def test_a_nullable_unique_key_is_refused(database_dsn: str) -> None:
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE items (id integer PRIMARY KEY, code text UNIQUE, body text)")
        conn.execute("INSERT INTO items VALUES (1, NULL, 'a b c'), (2, NULL, 'a b c')")
    with pytest.raises(errors.SourceError, match="key column 'code' of items allows NULL"):
        create_index(database_dsn, "items_k", "items", "body", key="code")
    with psycopg.connect(database_dsn) as conn:
        conn.execute("DELETE FROM items")
        conn.execute("ALTER TABLE items ALTER COLUMN code SET NOT NULL")
    index = create_index(database_dsn, "items_k", "items", "body", key="code")
    assert isinstance(index, Index)


def test_an_array_key_is_refused(database_dsn: str) -> None:
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE items (id integer[] PRIMARY KEY, body text)")
    with pytest.raises(errors.SourceError, match="key column 'id' is integer\\[\\], an array"):
        create_index(database_dsn, "items_k", "items", "body")


def test_a_key_whose_operators_are_out_of_reach_is_refused(database_dsn: str) -> None:
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE SCHEMA ext; CREATE EXTENSION isn SCHEMA ext")
        conn.execute("CREATE TABLE items (id ext.ean13 PRIMARY KEY, body text)")
    with pytest.raises(errors.SourceError, match=r"ext\.ean13, whose = and < operators are not"):
        create_index(database_dsn, "items_k", "items", "body")
