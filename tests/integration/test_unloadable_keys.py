"""Keys psycopg cannot load (dates and timestamps at infinity, BC or past the year 9999, a
time of 24:00) go through the queue, sync and build like any other: a sync batch carries
keys in their text form and reads them back with the type's input function, a build COPYs
them as text. One such key inserted by an app role used to break its index for good: every
later sync failed taking the queue, and build failed.
"""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql
from sqlalchemy import Engine

from simindex import IdenticalGroup, check, repair, sync
from simindex.core.spec import MinHash
from simindex.index import Index, create_index
from simindex.ops.queue import failed_items, queue_counts

# (key type, keys psycopg cannot load, an ordinary key)
CASES = {
    "date": (["infinity", "-infinity", "0044-03-15 BC", "10000-01-01"], "2024-06-01"),
    "timestamp": (
        ["infinity", "-infinity", "0100-01-01 00:00 BC", "12000-01-01 10:00"],
        "2024-06-01 12:00",
    ),
    "timestamptz": (["infinity", "-infinity", "0100-01-01 00:00+00 BC"], "2024-06-01 12:00+00"),
    "time": (["24:00:00"], "12:00:00"),
}


def keys_as_text(dsn: str, query: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        return {str(key) for (key,) in conn.execute(query)}


@pytest.mark.parametrize("key_type", sorted(CASES))
def test_keys_psycopg_cannot_load_are_synced_and_built(database_dsn: str, key_type: str) -> None:
    odd, ordinary = CASES[key_type]
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE TABLE events (at {} PRIMARY KEY, body text)").format(sql.SQL(key_type))
        )
        conn.execute(
            "INSERT INTO events VALUES (%s::text::" + key_type + ", 'an ordinary first row')",
            (ordinary,),
        )
    index = create_index(database_dsn, "events", "events", "body")
    index.build()
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        for number, key in enumerate(odd):
            conn.execute(
                f"INSERT INTO events VALUES (%s::text::{key_type}, %s)",
                (key, f"event number {number} at the edge of time, written by the app"),
            )
        conn.execute(
            "UPDATE events SET body = 'an ordinary row, changed after the odd ones' "
            f"WHERE at = %s::text::{key_type}",
            (ordinary,),
        )
    expected = keys_as_text(database_dsn, "SELECT at::text FROM events")
    report = sync(database_dsn, ["events"], batch_size=2)
    assert report.ok and report.indexed == len(odd) + 1
    assert queue_counts(database_dsn, "events") == (0, 0)
    assert keys_as_text(database_dsn, "SELECT key::text FROM simindex.events_simhash") == expected
    assert check(database_dsn, "events").ok
    with psycopg.connect(database_dsn, autocommit=True) as conn:  # lose one: repair finds it
        conn.execute(
            f"DELETE FROM simindex.events_simhash WHERE key = %s::text::{key_type}", (odd[-1],)
        )
    assert len(repair(database_dsn, "events").missing) == 1
    assert check(database_dsn, "events").ok
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        conn.execute(
            f"UPDATE events SET body = body || '!' WHERE at = %s::text::{key_type}", (odd[0],)
        )
    assert sync(database_dsn, ["events"], max_text_bytes=1).failed == 1
    ((failed_key, error, _, _),) = failed_items(database_dsn, "events")
    assert failed_key == odd[0] and "max_text_bytes" in error
    assert sync(database_dsn, ["events"], retry_failed=True).ok
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        conn.execute("UPDATE events SET body = body || ' (again)'")  # every key queued
    assert index.build().rows == len(odd) + 1
    assert queue_counts(database_dsn, "events") == (0, 0)  # the build took them off
    assert keys_as_text(database_dsn, "SELECT key::text FROM simindex.events_simhash") == expected
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        conn.execute(f"DELETE FROM events WHERE at = %s::text::{key_type}", (odd[0],))
    assert sync(database_dsn, ["events"]).ok
    assert keys_as_text(database_dsn, "SELECT key::text FROM simindex.events_simhash") == (
        expected - keys_as_text(database_dsn, f"SELECT '{odd[0]}'::{key_type}::text")
    )


TEXT = "the quarterly report of the northern office on the harvest, the weather and the roads"


def key_text(dsn: str, key_type: str, key: object) -> str:
    """A key as PostgreSQL prints it (an answer's date is a Python date, an odd one a str)."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(f"SELECT %s::text::{key_type}::text", (str(key),)).fetchone()
    assert row is not None
    return str(row[0])


@pytest.mark.parametrize("key_type", sorted(CASES))
def test_queries_answer_keys_psycopg_cannot_load(
    database_dsn: str, engine: Engine, key_type: str
) -> None:
    # Issue 20, what was left of build item 7: such keys failed every answer that held one.
    odd, ordinary = CASES[key_type]
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE TABLE events (at {} PRIMARY KEY, body text)").format(sql.SQL(key_type))
        )
        for key in [ordinary, *odd]:
            conn.execute(f"INSERT INTO events VALUES (%s::text::{key_type}, %s)", (key, TEXT))
    expected = keys_as_text(database_dsn, "SELECT at::text FROM events")
    simhash = create_index(database_dsn, "events", "events", "body")
    minhash = create_index(
        database_dsn, "events_jaccard", "events", "body", method=MinHash(threshold=0.5)
    )
    simhash.build()
    minhash.build()

    def texts(keys: list[object]) -> set[str]:
        return {key_text(database_dsn, key_type, key) for key in keys}

    odd_key = next(m.key for m in Index(database_dsn, "events").near(TEXT) if type(m.key) is str)
    for bind in (database_dsn, engine):
        on = Index(bind, "events")
        assert texts([m.key for m in on.near(TEXT)]) == expected
        assert texts([m.key for m in on.near_key(odd_key)]) | {odd_key} == expected
        jaccard = Index(bind, "events_jaccard")
        for verify in ("exact", "estimate"):
            assert texts([s.key for s in jaccard.similar(TEXT, verify=verify)]) == expected
            assert (
                texts([s.key for s in jaccard.similar(key=odd_key, verify=verify)]) | {odd_key}
                == expected
            )
        (group,) = on.pairs(groups=True)
        assert isinstance(group, IdenticalGroup)
        assert texts(list(group.keys)) == expected
        assert {texts([p.left, p.right]).pop() for p in jaccard.pairs()} <= expected
    for method in ("pairs", "bottom_k", "leader"):
        simhash.clusters(method=method)
        assert texts([m.key for m in simhash.cluster_members()]) == expected
        assert texts([s.key for s in simhash.survivors(method=method)]) == expected
    # On the caller's own connection, in their transaction: their adapters stay psycopg's.
    with engine.connect() as connection:
        assert texts([m.key for m in Index(connection, "events").near(TEXT)]) == expected
        raw = connection.connection.driver_connection
        assert isinstance(raw, psycopg.Connection)
        with pytest.raises(psycopg.DataError):
            raw.execute(f"SELECT %s::text::{key_type}", (odd[0],)).fetchone()
