"""``limit`` on every query path: a query inside a cluster of many copies returns the nearest
``limit`` rows, the same as the first rows of the full answer."""

from __future__ import annotations

import random
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, select

from simindex.core.bits import to_signed
from simindex.core.design import LshDesign
from simindex.core.packing import stored_rows
from simindex.core.spec import MinHash, SimHash, resolve
from simindex.index import Index, create_index
from simindex.sqlalchemy import near, near_key, similar, similar_key

WORDS = [f"w{i}" for i in range(2000)]
COPIES = 300
TEMPLATE = " ".join(f"template{i}" for i in range(30))


def corpus() -> list[str]:
    """A template with COPIES exact copies, 50 copies with one word changed, 300 others."""
    rng = random.Random(11)
    found = [TEMPLATE] * COPIES
    for i in range(50):
        words = TEMPLATE.split()
        words[rng.randrange(len(words))] = f"edit{i}"
        found.append(" ".join(words))
    found += [" ".join(rng.choice(WORDS) for _ in range(30)) for _ in range(300)]
    rng.shuffle(found)
    return found


def load(dsn: str, texts: list[str]) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute("CREATE TABLE notes (id integer PRIMARY KEY, body text)")
        with conn.cursor().copy("COPY notes (id, body) FROM STDIN") as copy:
            for key, text in enumerate(texts):
                copy.write_row((key, text))


def rows(dsn: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return [tuple(row) for row in conn.execute(query, params).fetchall()]


def test_simhash_limit_on_every_path(database_dsn: str, engine: Engine) -> None:
    texts = corpus()
    load(database_dsn, texts)
    index = create_index(database_dsn, "tmpl", "notes", "body", method=SimHash(max_distance=3))
    index.build()
    member = texts.index(TEMPLATE)
    full = [(m.key, m.distance) for m in index.near(TEMPLATE)]
    assert len(full) > COPIES
    first = full[:5]
    assert [(m.key, m.distance) for m in index.near(TEMPLATE, limit=5)] == first
    by_key = [(m.key, m.distance) for m in index.near_key(member)]
    assert [(m.key, m.distance) for m in index.near_key(member, limit=5)] == by_key[:5]
    fingerprint = to_signed(int(index.info().spec.simhash_values([TEMPLATE])[0][0]))
    assert rows(database_dsn, "SELECT * FROM simindex.tmpl_near_v1(%s, 3, 5)", fingerprint) == first
    assert (
        rows(database_dsn, "SELECT * FROM simindex.tmpl_near_key_v1(%s, 3, 5)", member)
        == by_key[:5]
    )
    assert (
        rows(database_dsn, "SELECT * FROM simindex.near_key_v1('tmpl', %s, max_rows => 5)", member)
        == by_key[:5]
    )
    with engine.connect() as conn:
        found = conn.execute(select(near(conn, "tmpl", TEMPLATE, limit=5))).all()
        assert sorted(found, key=lambda r: (r[1], r[0])) == first
        selectable = near_key(None, "tmpl", member, max_distance=3, limit=5)
        found = conn.execute(select(selectable)).all()
        assert sorted(found, key=lambda r: (r[1], r[0])) == by_key[:5]
        # Named notation: no max_distance needed for the limit.
        found = conn.execute(select(near_key(None, "tmpl", member, limit=5))).all()
        assert len(found) == 5
    assert_bad_limits(index, database_dsn, "near_key_v1('tmpl', 1, max_rows => 0)")


def test_minhash_limit_on_every_path(database_dsn: str, engine: Engine) -> None:
    texts = corpus()
    load(database_dsn, texts)
    index = create_index(database_dsn, "tmpl", "notes", "body", method=MinHash(0.8, 128))
    index.build()
    member = texts.index(TEMPLATE)
    full = [(m.key, m.similarity) for m in index.similar(TEMPLATE)]
    assert len(full) > COPIES
    assert [(m.key, m.similarity) for m in index.similar(TEMPLATE, limit=5)] == full[:5]
    by_key = [(m.key, m.similarity) for m in index.similar(key=member)]
    assert [(m.key, m.similarity) for m in index.similar(key=member, limit=5)] == by_key[:5]
    exact = index.similar(TEMPLATE, verify="exact")
    assert index.similar(TEMPLATE, verify="exact", limit=3) == exact[:3]
    assert (
        rows(
            database_dsn,
            "SELECT key, similarity FROM simindex.tmpl_similar_key_v1(%s, 0.8, 5)",
            member,
        )
        == by_key[:5]
    )
    assert (
        rows(
            database_dsn,
            "SELECT key, similarity FROM simindex.similar_key_v1('tmpl', %s, max_rows => 5)",
            member,
        )
        == by_key[:5]
    )
    with engine.connect() as conn:
        found = conn.execute(select(similar(conn, "tmpl", TEMPLATE, limit=5))).all()
        assert sorted(found, key=lambda r: (-r[1], r[0])) == full[:5]
        found = conn.execute(select(similar_key(None, "tmpl", member, limit=5))).all()
        assert sorted(found, key=lambda r: (-r[1], r[0])) == by_key[:5]
    assert_bad_limits(index, database_dsn, "similar_key_v1('tmpl', 1, max_rows => 0)")


def assert_bad_limits(index: Index, dsn: str, dispatcher: str) -> None:
    simhash = index.info().spec.kind == "simhash"
    query = index.near_key if simhash else (lambda key, **kw: index.similar(key=key, **kw))
    with pytest.raises(ValueError, match="limit must be at least 1"):
        query(1, limit=0)
    with pytest.raises(TypeError, match="limit must be an int"):
        query(1, limit=2.5)  # type: ignore[arg-type]  # the point: a wrong type
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="max_rows must be at least 1"):
        rows(dsn, f"SELECT * FROM simindex.{dispatcher}")
    with pytest.raises(ValueError, match="limit must be at least 1"):
        near_key(None, "tmpl", 1, limit=0)


def test_the_dispatcher_returns_more_than_the_default_bound_when_asked(database_dsn: str) -> None:
    """simindex.near_key_v1 passes max_rows on to the typed function: 1,200 copies of a text
    answer 1,199 rows with max_rows => 1500 (and 1,000, the default bound, without)."""
    load(database_dsn, [TEMPLATE] * 1200)
    create_index(database_dsn, "many", "notes", "body", method=SimHash(max_distance=3)).build()
    asked = "SELECT count(*) FROM simindex.near_key_v1('many', 0, max_rows => %s)"
    assert rows(database_dsn, asked, 1500) == [(1199,)]
    assert rows(database_dsn, asked, None) == [(1199,)]
    default = "SELECT count(*) FROM simindex.near_key_v1('many', 0)"
    assert rows(database_dsn, default) == [(1000,)]


def test_minhash_a_set_of_max_rows_copies_answers_its_first_visible_keys(database_dsn: str) -> None:
    """A query whose own shingle set has max_rows rows or more answers its first visible keys
    (read from the set's index, not the band indexes): the same rows as the first of the full
    answer, skipping rows deleted from the source and not yet swept; when too few of them are
    visible, the full query answers, the near copies after the copies."""
    texts = corpus()
    load(database_dsn, texts)
    create_index(database_dsn, "tmpl", "notes", "body", method=MinHash(0.8, 128)).build()
    copies = sorted(key for key, text in enumerate(texts) if text == TEMPLATE)
    member = copies[-1]
    by_key = "SELECT key, similarity, identical FROM simindex.tmpl_similar_key_v1(%s, 0.8, %s)"
    full = rows(database_dsn, by_key, member, 1000)
    assert [row[0] for row in full[: COPIES - 1]] == copies[:-1]
    assert all(identical for _, _, identical in full[: COPIES - 1])
    assert not any(identical for _, _, identical in full[COPIES - 1 :])
    assert len(full) > COPIES
    assert rows(database_dsn, by_key, member, 5) == full[:5]
    with psycopg.connect(database_dsn) as conn:  # no worker: the index rows stay
        conn.execute("DELETE FROM notes WHERE id = ANY(%s)", (copies[1:4],))
    after = [row for row in full if row[0] not in copies[1:4]]
    assert rows(database_dsn, by_key, member, 5) == after[:5]
    assert rows(database_dsn, by_key, member, COPIES - 2) == after[: COPIES - 2]
    sketch = (
        "SELECT sketch, ARRAY[b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14], "
        "set_hash FROM simindex.tmpl_minhash WHERE key = %s"
    )
    arguments = rows(database_dsn, sketch, member)[0]
    by_text = "SELECT key, similarity, identical FROM simindex.tmpl_similar_v1(%s, %s, 0.8, %s, %s)"
    assert rows(database_dsn, by_text, arguments[0], arguments[1], 7, arguments[2]) == [
        (key, 1.0, True) for key in [copies[0], *copies[4:10]]
    ]


def test_minhash_identical_rows_come_before_other_rows_that_estimate_one(database_dsn: str) -> None:
    """Of rows that score 1, those of the query's own shingle set come first: a long text
    with one word changed whose sketch is the text's own (an estimate of 1) comes after the
    text's copies, though its key is smaller."""
    method = MinHash(0.8, 128)
    spec = resolve(method)
    assert isinstance(spec.design, LshDesign)
    design = spec.design
    words = [f"word{i}" for i in range(3000)]

    def stored(text: str) -> tuple[str, int]:
        rows = stored_rows(design, spec.minhash_values([text])[0], method.sketch_bits)
        return rows.sketches[0], int(rows.set_hashes[0])

    text = " ".join(words)
    variants = (" ".join([*words[:i], "edited", *words[i + 1 :]]) for i in range(0, 3000, 7))
    variant = next(v for v in variants if stored(v)[0] == stored(text)[0])
    assert stored(variant)[1] != stored(text)[1]
    load(database_dsn, [variant, text, text])
    create_index(database_dsn, "long", "notes", "body", method=MinHash(0.8, 128)).build()
    by_key = "SELECT key, similarity, identical FROM simindex.long_similar_key_v1(%s, 0.8, %s)"
    assert rows(database_dsn, by_key, 2, 10) == [(1, 1.0, True), (0, 1.0, False)]
    assert rows(database_dsn, by_key, 2, 1) == [(1, 1.0, True)]
    index = Index(database_dsn, "long")
    assert [m.key for m in index.similar(key=2, verify="estimate")] == [1, 0]
    assert [m.key for m in index.similar(text, verify="estimate", limit=2)] == [1, 2]
