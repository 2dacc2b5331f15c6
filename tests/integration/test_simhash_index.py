from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql

from simindex import errors
from simindex.core.bits import hamming_distance, to_signed
from simindex.core.spec import SimHash
from simindex.db.catalog import store_for
from simindex.db.simhash_store import SimHashStore
from simindex.db.statements import statement
from simindex.index import Index, create_index, drop_index, get_index

WORDS = [f"w{i}" for i in range(3000)]


def make_text(rng: random.Random, length: int = 60) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(length))


@pytest.fixture
def documents(conn: psycopg.Connection[Any]) -> str:
    """A documents table with planted near-duplicates, NULL and empty texts."""
    rng = random.Random(7)
    conn.execute("CREATE TABLE documents (id integer PRIMARY KEY, body text, note text)")
    rows: list[tuple[int, str | None]] = [(i, make_text(rng)) for i in range(1, 201)]
    base = str(rows[9][1])
    rows.append((1001, base + " extra"))
    rows.append((1002, base.replace(base.split()[30], "changed", 1)))
    rows.append((1003, None))
    rows.append((1004, ""))
    rows.append((1005, "  !!! "))
    with conn.cursor().copy("COPY documents (id, body) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
    conn.commit()
    return "documents"


def test_build_and_query_by_text_and_key(database_dsn: str, documents: str) -> None:
    index = create_index(database_dsn, "docs", documents, "body", method=SimHash(max_distance=3))
    with pytest.raises(errors.IndexNotReadyError, match="run build"):
        index.near("anything")
    report = index.build()
    assert (report.rows, report.skipped) == (202, 3)
    info = index.info()
    assert (info.state, info.row_count, info.skipped_count) == ("ready", 202, 3)

    with psycopg.connect(database_dsn) as conn:
        base = conn.execute("SELECT body FROM documents WHERE id = 10").fetchone()[0]  # type: ignore[index]
    found = {match.key: match.distance for match in index.near(base)}
    assert found[10] == 0
    assert {1001, 1002} <= set(found)
    assert all(distance <= 3 for distance in found.values())
    by_key = index.near_key(10)
    assert 10 not in {m.key for m in by_key}
    assert {1001, 1002} <= {m.key for m in by_key}
    assert by_key == sorted(by_key, key=lambda m: (m.distance, m.key))
    assert index.near("") == []
    with pytest.raises(errors.KeyNotIndexedError, match="1003"):
        index.near_key(1003)
    with pytest.raises(ValueError, match="from 0 to the index's 3"):
        index.near(base, max_distance=4)


def test_rebuild_is_safe_and_sees_changes(database_dsn: str, documents: str) -> None:
    index = create_index(database_dsn, "docs", documents, "body")
    index.build()
    with psycopg.connect(database_dsn) as conn:
        conn.execute("DELETE FROM documents WHERE id > 100")
    assert index.build().rows == 100
    assert index.info().row_count == 100
    seen: list[tuple[int, int | None]] = []
    report = index.build(
        workers=2, batch_size=7, progress=lambda done, total: seen.append((done, total))
    )
    assert report.rows == 100
    assert [done for done, _ in seen] == [*range(7, 100, 7), 100]


def test_sql_function_joins_with_the_app_table(database_dsn: str, documents: str) -> None:
    index = create_index(database_dsn, "docs", documents, "body")
    index.build()
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT d.id, n.distance FROM documents d "
            "JOIN simindex.docs_near_key_v1(10) n ON d.id = n.key ORDER BY n.distance, d.id"
        ).fetchall()
        typed = conn.execute(
            "SELECT pg_typeof(key)::text FROM simindex.docs_near_key_v1(10) LIMIT 1"
        ).fetchone()
        fingerprint = conn.execute(
            "SELECT fingerprint FROM simindex.docs_simhash WHERE key = 10"
        ).fetchone()
        by_fingerprint = conn.execute(
            "SELECT key FROM simindex.docs_near_v1(%s, 1)", fingerprint
        ).fetchall()
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="max_distance"):
            conn.execute("SELECT * FROM simindex.docs_near_v1(0, 9)")
        by_name = conn.execute(
            "SELECT key, distance FROM simindex.near_key_v1('docs', 10::bigint) "
            "ORDER BY distance, key"
        ).fetchall()
        typed_by_name = conn.execute(
            "SELECT pg_typeof(key)::text FROM simindex.near_key_v1('docs', 10::bigint) LIMIT 1"
        ).fetchone()
        with pytest.raises(psycopg.errors.UndefinedObject, match="no simindex index"):
            conn.execute("SELECT * FROM simindex.near_key_v1('nothing', 1)")
    assert [(m.key, m.distance) for m in index.near_key(10)] == rows == by_name
    assert typed_by_name == ("bigint",)
    assert typed == ("integer",)
    assert (10,) in by_fingerprint


def planted_fingerprints(count: int, seed: int, max_distance: int) -> list[int]:
    """Random fingerprints, many with the top bit set, plus neighbours at every distance."""
    rng = random.Random(seed)
    values = [rng.getrandbits(64) | (1 << 63) * rng.getrandbits(1) for _ in range(count)]
    for centre in values[: count // 10]:
        for distance in range(max_distance + 2):
            bits = rng.sample(range(64), distance)
            neighbour = centre
            for bit in bits:
                neighbour ^= 1 << bit
            values.append(neighbour)
    return values


def load_synthetic(
    dsn: str, index: Index, fingerprints: list[int], keys: list[int] | None = None
) -> SimHashStore:
    """Fill an empty index with chosen fingerprints (to test the SQL against brute force), under
    ``keys`` (default: 0, 1, 2, ...)."""
    with psycopg.connect(dsn) as conn:
        info = index.info()
        store = store_for(index.index_schema, index.name, info.source, info.spec)
        assert isinstance(store, SimHashStore)
        if keys is None:
            keys = list(range(len(fingerprints)))
        # Rows of the source too: answers name only keys the table holds.
        conn.execute(
            sql.SQL("INSERT INTO {} ({}) SELECT unnest(%s::{}[]) ON CONFLICT DO NOTHING").format(
                info.source.identifier,
                sql.Identifier(info.source.key_column),
                sql.SQL(info.source.key_type),
            ),
            (keys,),
        )
        # Not for a worker: the chosen fingerprints stand for these rows.
        for kind in ("queue", "inbox"):
            entries = sql.Identifier(index.index_schema, f"{index.name}_{kind}")
            conn.execute(sql.SQL("DELETE FROM {}").format(entries))
        store.copy(conn, store.rows(keys, np.array(fingerprints, dtype=np.uint64)))
        conn.execute(statement("analyze", table=store.table()))
        conn.execute(
            statement("catalog_built", catalog=sql.Identifier("simindex", "indexes")),
            {"name": index.name, "row_count": len(keys), "skipped_count": 0},
        )
    return store


@pytest.mark.parametrize(("max_distance", "num_blocks"), [(3, 4), (3, 6), (2, 3), (5, 7)])
def test_sql_matches_brute_force(database_dsn: str, max_distance: int, num_blocks: int) -> None:
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE fp (id bigint PRIMARY KEY, body text)")
    index = create_index(
        database_dsn,
        "fp",
        "fp",
        "body",
        method=SimHash(max_distance=max_distance, num_blocks=num_blocks),
    )
    fingerprints = planted_fingerprints(2000, max_distance * 100 + num_blocks, max_distance)
    load_synthetic(database_dsn, index, fingerprints)
    rng = random.Random(1)
    queries = rng.sample(fingerprints, 60) + [rng.getrandbits(64) for _ in range(10)]
    for query in queries:
        for distance in {max_distance, max_distance // 2}:
            expected = sorted(
                (hamming_distance(value, query), key)
                for key, value in enumerate(fingerprints)
                if hamming_distance(value, query) <= distance
            )
            got = index.near(fingerprint=to_signed(query), max_distance=distance)
            assert [(m.distance, m.key) for m in got] == expected


def test_side_table_is_read_by_index_scans(database_dsn: str) -> None:
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE fp (id bigint PRIMARY KEY, body text)")
    index = create_index(database_dsn, "fp", "fp", "body", method=SimHash(num_blocks=4))
    fingerprints = planted_fingerprints(30_000, 3, 3)
    store = load_synthetic(database_dsn, index, fingerprints)
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(store.table()))
        query = store.candidates_query(sql.Placeholder("fingerprint"), sql.Placeholder("k"))
        plan = conn.execute(
            sql.SQL("EXPLAIN (FORMAT JSON) {}").format(query),
            {"fingerprint": 12345, "k": 3},
        ).fetchone()[0]  # type: ignore[index]
    nodes = list(plan_nodes(plan[0]["Plan"]))
    assert "Seq Scan" not in {node["Node Type"] for node in nodes}
    used = {node.get("Index Name") for node in nodes}
    assert used >= {f"fp_simhash_p{i}" for i in range(4)}


def plan_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from plan_nodes(child)


@pytest.mark.parametrize(
    ("key_type", "make_key"),
    [
        ("bigint", lambda i: 2**40 + i),
        ("uuid", lambda i: uuid.UUID(int=i)),
        ("text", lambda i: f"doc-{i:04d}"),
        ("varchar(20)", lambda i: f"v{i}"),
        ("text", lambda i: f"tab\there\\back\nline\r{i} ünï"),
    ],
)
def test_key_types_and_odd_identifiers(database_dsn: str, key_type: str, make_key: Any) -> None:
    rng = random.Random(3)
    texts = [make_text(rng) for _ in range(30)]
    texts.append(texts[0] + " tail")
    keys = [make_key(i) for i in range(len(texts))]
    with psycopg.connect(database_dsn) as conn:
        conn.execute('CREATE SCHEMA "Odd Schema"')
        conn.execute(
            sql.SQL(
                'CREATE TABLE "Odd Schema"."My Docs" ("Key Col" {} PRIMARY KEY, "Body; DROP" text)'
            ).format(sql.SQL(key_type))
        )
        with conn.cursor().copy('COPY "Odd Schema"."My Docs" FROM STDIN') as copy:
            for row in zip(keys, texts, strict=True):
                copy.write_row(row)
    index = create_index(database_dsn, "odd", "My Docs", "Body; DROP", schema="Odd Schema")
    index.build()
    matches = index.near_key(keys[0])
    assert [m.key for m in matches] == [keys[-1]]
    assert type(matches[0].key) is type(keys[0])


def test_drop_removes_everything(database_dsn: str, documents: str) -> None:
    create_index(database_dsn, "docs", documents, "body").build()
    drop_index(database_dsn, "docs")
    with psycopg.connect(database_dsn) as conn:
        left = conn.execute(
            "SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE nspname = 'simindex' AND relname LIKE 'docs%' "
            "UNION ALL SELECT proname FROM pg_proc WHERE proname LIKE 'docs%'"
        ).fetchall()
        assert conn.execute("SELECT count(*) FROM documents").fetchone() == (205,)
    assert left == []
    with pytest.raises(errors.IndexNotFoundError):
        get_index(database_dsn, "docs")
    drop_index(database_dsn, "docs", missing_ok=True)


def test_bad_arguments_get_clear_errors(database_dsn: str, documents: str) -> None:
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE nokey (body text)")
        conn.execute("CREATE TABLE twokeys (a int, b int, body text, PRIMARY KEY (a, b))")
        conn.execute("CREATE TABLE numbers (id int PRIMARY KEY, n integer)")
    cases: list[tuple[dict[str, Any], type[Exception], str]] = [
        ({"table": "missing"}, errors.SourceError, "does not exist"),
        ({"column": "nope"}, errors.SourceError, "column 'nope' does not exist"),
        ({"table": "numbers", "column": "n"}, errors.SourceError, "a text column"),
        ({"table": "nokey"}, errors.SourceError, "no primary key"),
        ({"table": "twokeys"}, errors.SourceError, "composite primary key"),
        ({"key": "note"}, errors.SourceError, "no unique index"),
        ({"name": "Bad Name"}, ValueError, "index name"),
        ({"method": SimHash(max_distance=4, num_blocks=3)}, ValueError, "num_blocks"),
    ]
    for overrides, error, message in cases:
        arguments: dict[str, Any] = {"name": "docs", "table": documents, "column": "body"}
        arguments |= overrides
        with pytest.raises(error, match=message):
            create_index(database_dsn, **arguments)
    create_index(database_dsn, "docs", documents, "body")
    with pytest.raises(errors.IndexExistsError):
        create_index(database_dsn, "docs", documents, "body")
