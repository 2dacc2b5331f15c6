"""``limit`` on every query path: a query inside a cluster of many copies returns the nearest
``limit`` rows, the same as the first rows of the full answer."""

from __future__ import annotations

import random
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, select

from simindex.core.bits import to_signed
from simindex.core.spec import MinHash, SimHash
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
