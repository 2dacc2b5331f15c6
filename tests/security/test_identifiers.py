"""No injection through any identifier: the app's schema, table and column names, and simindex's
own schema, may be anything PostgreSQL accepts, and every command works with them (the SQL
``simindex sql`` prints too: run as printed, it makes the index again).

The names are chosen by an ordinary role (the table's owner); a superuser runs simindex, with
``check_function_bodies = off`` (a database owner may set it), so that a body ended early would
not even be parsed before it ran.
"""

from __future__ import annotations

import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

import simindex
from simindex import check, sync
from simindex.db.schema import downgrade
from simindex.index import Index, create_index, drop_index
from tests.security.conftest import MakeRole, is_superuser, scalar, superuser

INJECTION = "$body$;ALTER ROLE {attacker} SUPERUSER;SELECT $body$"
NAMES = {
    "dollar": "$",
    "dollar tag": "$body$",
    "injection": INJECTION,
    "text ending in a tag": "b$body$",
    "double quote": 'a"b',
    "single quote": "a'b",
    "backslash": "a\\b",
    "dot": "a.b",
    "space": "a b",
    "percent": "a%sb%I",
    "63 bytes": "ü" * 31 + "x",
}
TEXTS = [
    "the first text of the table, about near duplicates",
    "the first text of the table, about near duplicates!",
    "something else entirely, which matches nothing here",
]


def names_for(label: str, attacker: str) -> dict[str, str]:
    """Schema, table, key and text column names made of one hostile name (the longest one
    is used as it is, its last character changed where two names must differ)."""
    name = NAMES[label].replace("{attacker}", attacker)
    if len(name.encode()) == 63:
        return {"schema": name, "table": name, "key": name, "text": name[:-1] + "t"}
    return {"schema": "s" + name, "table": name, "key": "k" + name, "text": "t" + name}


def unsafe_bodies_dsn(dsn: str) -> str:
    return make_conninfo(dsn, options="-c check_function_bodies=off")


@pytest.mark.parametrize("label", sorted(NAMES))
def test_every_command_works_with_the_name(
    database_dsn: str, make_role: MakeRole, label: str
) -> None:
    alice = make_role("alice")
    names = names_for(label, alice.name)
    schema, table, key, text = (sql.Identifier(names[part]) for part in names)
    owner = sql.Identifier(alice.name)
    superuser(database_dsn, sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(schema, owner))
    alice.run(
        sql.SQL("CREATE TABLE {}.{} ({} integer PRIMARY KEY, {} text)").format(
            schema, table, key, text
        ),
        sql.SQL("INSERT INTO {}.{} VALUES (1, {}), (2, {})").format(
            schema, table, sql.Literal(TEXTS[0]), sql.Literal(TEXTS[2])
        ),
    )
    dsn = unsafe_bodies_dsn(database_dsn)
    index = create_index(
        dsn, "odd", names["table"], names["text"], schema=names["schema"], key=names["key"]
    )
    assert index.build().rows == 2
    alice.run(
        sql.SQL("INSERT INTO {}.{} VALUES (3, {})").format(schema, table, sql.Literal(TEXTS[1])),
        sql.SQL("UPDATE {}.{} SET {} = {} WHERE {} = 2").format(
            schema, table, text, sql.Literal(TEXTS[2] + " again"), key
        ),
        sql.SQL("DELETE FROM {}.{} WHERE {} = 2").format(schema, table, key),
    )
    report = sync(dsn)  # row 3 indexed; row 2 queued by its update, then deleted
    assert (report.indexed, report.removed) == (1, 1)
    assert [m.key for m in index.near_key(1)] == [3]
    assert scalar(dsn, "SELECT array_agg(key) FROM simindex.near_key_v1('odd', 1)") == [3]
    assert check(dsn, "odd").ok
    assert index.clusters().duplicate_rows == 2
    assert {(s.key, s.survivor) for s in index.survivors("pairs", prefer="longest_text")} == {
        (1, False),
        (3, True),
    }
    assert index.clusters(method="bottom_k").rows == 2
    # simindex sql: the text as printed, run as it is, makes the same index again.
    printed = index.sql()
    drop_index(dsn, "odd")
    superuser(dsn, printed)
    assert index.sql() == printed
    index.build()
    assert [m.key for m in index.near_key(1)] == [3]
    drop_index(dsn, "odd")
    assert not is_superuser(database_dsn, alice)


@pytest.mark.parametrize("label", ["injection", "dollar tag", "backslash", "63 bytes"])
def test_simindex_itself_in_a_schema_of_that_name(empty_database_dsn: str, label: str) -> None:
    index_schema = NAMES[label].replace("{attacker}", "nobody")
    dsn = unsafe_bodies_dsn(empty_database_dsn)
    simindex.migrate(dsn, schema=index_schema)
    superuser(
        empty_database_dsn,
        "CREATE TABLE docs (id integer PRIMARY KEY, body text)",
        sql.SQL("INSERT INTO docs VALUES (1, {}), (2, {})").format(
            sql.Literal(TEXTS[0]), sql.Literal(TEXTS[1])
        ),
    )
    index = create_index(dsn, "docs", "docs", "body", index_schema=index_schema)
    index.build()
    superuser(
        empty_database_dsn,
        sql.SQL("INSERT INTO docs VALUES (3, {})").format(sql.Literal(TEXTS[0])),
    )
    assert sync(dsn, index_schema=index_schema).indexed == 1
    assert [m.key for m in index.near_key(1)] == [2, 3]
    assert [m.key for m in Index(dsn, "docs", index_schema=index_schema).near_key(3)] == [1, 2]
    drop_index(dsn, "docs", index_schema=index_schema)
    downgrade(dsn, schema=index_schema)
