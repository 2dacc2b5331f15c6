from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from simindex import errors
from simindex.core.spec import MinHash, resolve
from simindex.core.text import Shingling
from simindex.db.catalog import store_for
from simindex.db.minhash_store import MinHashStore
from simindex.index import create_index

WORDS = [f"t{i}" for i in range(2000)]


def corpus(seed: int, count: int) -> list[str]:
    """Random texts, and for every tenth one a copy with a few words changed."""
    rng = random.Random(seed)
    texts = [" ".join(rng.choice(WORDS) for _ in range(80)) for _ in range(count)]
    for i in range(0, count, 10):
        words = texts[i].split()
        for position in rng.sample(range(len(words)), 2):
            words[position] = "edited"
        texts.append(" ".join(words))
    return texts


def load(dsn: str, texts: list[str | None]) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute("CREATE TABLE notes (id integer PRIMARY KEY, body text)")
        with conn.cursor().copy("COPY notes (id, body) FROM STDIN") as copy:
            for key, text in enumerate(texts):
                copy.write_row((key, text))


@pytest.mark.parametrize("scheme", ["classic", "one_permutation"])
def test_similar_finds_planted_copies(database_dsn: str, scheme: str) -> None:
    texts: list[str | None] = [*corpus(1, 200), None, ""]
    load(database_dsn, texts)
    index = create_index(
        database_dsn,
        "notes",
        "notes",
        "body",
        method=MinHash(0.7, 128, scheme),  # type: ignore[arg-type]
    )
    report = index.build()
    assert (report.rows, report.skipped) == (220, 2)
    for original in range(0, 200, 10):
        copy = 200 + original // 10
        found = index.similar(texts[original])
        assert found[0].key == original and found[0].similarity == 1.0
        assert copy in {match.key for match in found}
        by_key = index.similar(key=original)
        assert original not in {match.key for match in by_key}
        assert copy in {match.key for match in by_key}
    assert index.similar("") == []
    with pytest.raises(errors.KeyNotIndexedError):
        index.similar(key=220)


def test_every_key_sharing_a_band_is_a_candidate(database_dsn: str) -> None:
    texts: list[str | None] = list(corpus(2, 150))
    load(database_dsn, texts)
    method = MinHash(0.5, 64, num_bands=16, rows_per_band=4)
    index = create_index(database_dsn, "notes", "notes", "body", method=method)
    index.build()
    spec = resolve(method)
    values, _ = spec.minhash_values(texts)
    bands = spec.design.band_hashes(values)  # type: ignore[union-attr]
    for query in range(0, len(texts), 7):
        sharing = {key for key in range(len(texts)) if (bands[key] == bands[query]).any()}
        with pytest.warns(errors.LowRecallWarning, match="below the 0.5"):
            found = {match.key for match in index.similar(texts[query], threshold=0.0)}
        assert found == sharing


def test_exact_reranks_by_true_jaccard(database_dsn: str) -> None:
    texts: list[str | None] = list(corpus(3, 100))
    load(database_dsn, texts)
    index = create_index(database_dsn, "notes", "notes", "body", method=MinHash(0.6))
    index.build()
    shingling = Shingling()

    def jaccard(a: str | None, b: str | None) -> float:
        first, second = set(shingling.hashes(a).tolist()), set(shingling.hashes(b).tolist())
        return len(first & second) / len(first | second)

    query = texts[0]
    # Brute force: the rows whose exact Jaccard reaches 0.6 (row 0 and its edited copy 100).
    expected = {key: jaccard(query, text) for key, text in enumerate(texts)}
    expected = {key: value for key, value in expected.items() if value >= 0.6}
    assert set(expected) == {0, 100} and expected[100] < 1.0
    found = index.similar(query, verify="exact")
    assert {match.key: match.similarity for match in found} == pytest.approx(expected)
    assert [m.similarity for m in found] == sorted((m.similarity for m in found), reverse=True)
    by_key = index.similar(key=0, verify="exact")
    assert [m.key for m in by_key] == [100]
    assert by_key[0].similarity == pytest.approx(expected[100])


def test_sql_function_by_key(database_dsn: str) -> None:
    load(database_dsn, list(corpus(4, 50)))
    create_index(database_dsn, "notes", "notes", "body", method=MinHash(0.7)).build()
    with psycopg.connect(database_dsn) as conn:
        rows = conn.execute(
            "SELECT n.id, s.similarity FROM notes n "
            "JOIN simindex.notes_similar_key_v1(0) s ON n.id = s.key"
        ).fetchall()
        by_name = conn.execute(
            "SELECT key, similarity FROM simindex.similar_key_v1('notes', 0)"
        ).fetchall()
    assert by_name == rows
    assert rows[0][0] == 50
    assert 0.7 <= rows[0][1] <= 1.0


def test_wrong_query_kind_is_refused(database_dsn: str) -> None:
    load(database_dsn, list(corpus(5, 20)))
    index = create_index(database_dsn, "notes", "notes", "body", method=MinHash())
    index.build()
    with pytest.raises(TypeError, match="MinHash index"):
        index.near("text")
    with pytest.raises(TypeError, match="exactly one"):
        index.similar("a", key=1)
    with pytest.raises(ValueError, match="threshold"):
        index.similar("a", threshold=1.5)


def plan_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from plan_nodes(child)


def test_band_keys_are_read_by_index_scans(database_dsn: str) -> None:
    texts: list[str | None] = list(corpus(6, 3000))
    load(database_dsn, texts)
    method = MinHash(0.8, 128)
    index = create_index(database_dsn, "notes", "notes", "body", method=method)
    index.build()
    spec = resolve(method)
    values, _ = spec.minhash_values(texts[:1])
    with psycopg.connect(database_dsn) as conn:
        info = index.info()
        store = store_for("simindex", "notes", info.source, info.spec)
        assert isinstance(store, MinHashStore)
        # The very query of the SQL function, prepared with its parameters.
        created = store.function_statements()[0].as_string(conn)
        body = created.split("$body$")[1].split("RETURN QUERY")[-1].split(";\nEND")[0]
        # Its LIMIT counts the rows of the query's own set, a variable of the function.
        body = body.replace("$4 - same", "$4")
        conn.execute(
            "PREPARE similar_query(bit varying, integer[], double precision, integer, bigint)"
            f" AS {body}"
        )
        sketch, band_keys, set_hash = store.query_arguments(values[0])
        plan = conn.execute(
            sql.SQL("EXPLAIN (FORMAT JSON) EXECUTE similar_query({}, {}, 0.8, NULL, {})").format(
                sql.Literal(sketch), sql.Literal(band_keys), sql.Literal(set_hash)
            )
        ).fetchone()[0]  # type: ignore[index]
    nodes = list(plan_nodes(plan[0]["Plan"]))
    assert "Seq Scan" not in {node["Node Type"] for node in nodes}
    assert {node.get("Relation Name") for node in nodes} >= {"notes_minhash"}


def test_the_rows_of_a_set_are_read_in_key_order_from_the_first_band_index(
    database_dsn: str,
) -> None:
    """Both query functions read the rows of the query's own set from the (b0, set_hash, key)
    index, in key order (no sort), by the first band key and the set hash: the rows of one set
    share every band key, so no index of set hashes alone is needed."""
    others = corpus(8, 3000)
    texts: list[str | None] = [*others, *[corpus(9, 1)[0]] * 300]
    load(database_dsn, texts)
    index = create_index(database_dsn, "notes", "notes", "body", method=MinHash(0.8, 128))
    index.build()
    spec = resolve(MinHash(0.8, 128))
    values, _ = spec.minhash_values(texts[-1:])
    with psycopg.connect(database_dsn) as conn:
        info = index.info()
        store = store_for("simindex", "notes", info.source, info.spec)
        assert isinstance(store, MinHashStore)
        by_value, by_key = (
            statement.as_string(conn) for statement in store.function_statements()[:2]
        )
        _, band_keys, set_hash = store.query_arguments(values[0])
        own = by_value.split("IF $5 IS NOT NULL THEN")[1].split("RETURN QUERY")[1].split(";")[0]
        for parameter, renumbered in (("$2", "$1"), ("$4", "$2"), ("$5", "$3")):
            own = own.replace(parameter, renumbered)
        conn.execute(f"PREPARE by_value(integer[], integer, bigint) AS {own}")
        query = "\n".join(
            line for line in by_key.splitlines() if not line.lstrip().startswith("--")
        )
        query = query.split("RETURN QUERY")[2].split(";")[0]  # where no policy applies
        for variable, parameter in (("row_key", "$1"), ("threshold", "$2"), ("max_rows", "$3")):
            query = query.replace(variable, parameter)
        conn.execute(f"PREPARE by_key(bigint, double precision, integer) AS {query}")
        arguments = [sql.Literal(band_keys), sql.Literal(1000), sql.Literal(set_hash)]
        by_key_arguments = [sql.Literal(len(others)), sql.Literal(0.8), sql.Literal(1000)]
        plans = [
            conn.execute(
                sql.SQL("EXPLAIN (FORMAT JSON) EXECUTE {}({})").format(
                    sql.Identifier(name), sql.SQL(", ").join(values)
                )
            ).fetchone()[0]  # type: ignore[index]
            for name, values in (("by_value", arguments), ("by_key", by_key_arguments))
        ]
        rows = conn.execute(
            sql.SQL("EXECUTE by_value({})").format(sql.SQL(", ").join(arguments))
        ).fetchall()
        key_rows = conn.execute(
            sql.SQL("EXECUTE by_key({})").format(sql.SQL(", ").join(by_key_arguments))
        ).fetchall()
    # By key, the rows of the set are the first child of the answer's Append, then the bands'.
    appended = [node for node in plan_nodes(plans[1][0]["Plan"]) if node["Node Type"] == "Append"]
    for plan in (plans[0][0]["Plan"], appended[0]["Plans"][0]):
        nodes = list(plan_nodes(plan))
        assert "Sort" not in {node["Node Type"] for node in nodes}
        scans = [node for node in nodes if node.get("Relation Name") == "notes_minhash"]
        assert [node.get("Index Name") for node in scans] == ["notes_minhash_b0"]
        assert scans[0]["Node Type"] in ("Index Scan", "Index Only Scan")
    assert [row[0] for row in key_rows] == list(range(len(others) + 1, len(texts)))
    assert [row[0] for row in rows] == list(range(len(others), len(texts)))


def test_similar_key_of_an_index_whose_table_was_dropped_fails_clearly(
    database_dsn: str,
) -> None:
    """similar_key_v1 is one statement naming the source (its probes, inlined): a dropped
    source fails that statement's planning, and the checks then say what happened (55000), in
    a session that planned it before the drop and in a new one."""
    load(database_dsn, [*corpus(10, 20), *[corpus(11, 1)[0]] * 3])
    create_index(database_dsn, "notes", "notes", "body", method=MinHash(0.8, 128)).build()
    query = "SELECT key FROM simindex.notes_similar_key_v1(22)"
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        assert [row[0] for row in conn.execute(query)] == [23, 24]
        conn.execute("DROP TABLE notes")
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="was dropped"):
            conn.execute(query)
    with (
        psycopg.connect(database_dsn, autocommit=True) as conn,
        pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="was dropped"),
    ):
        conn.execute(query)


def test_text_keys_with_copy_special_characters(database_dsn: str) -> None:
    texts = corpus(7, 30)
    keys = [f"k\t{i}\\\n{'ü' * (i % 3)}" for i in range(len(texts))]
    with psycopg.connect(database_dsn) as conn:
        conn.execute("CREATE TABLE notes (id text PRIMARY KEY, body text)")
        with conn.cursor().copy("COPY notes (id, body) FROM STDIN") as copy:
            for row in zip(keys, texts, strict=True):
                copy.write_row(row)
    index = create_index(database_dsn, "notes", "notes", "body", method=MinHash(0.7))
    assert index.build().rows == len(texts)
    assert keys[30] in {match.key for match in index.similar(key=keys[0])}
