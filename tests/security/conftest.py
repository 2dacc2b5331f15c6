"""What the security tests share: login roles that are no superuser, and their connections.

Every attack runs on a connection *logged in* as an ordinary role (not ``SET ROLE`` from a
superuser session, which could simply reset the role). Roles are cluster-wide, so each test's
are named apart and dropped afterwards, with what they own and were granted in the database.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

_numbers = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Role:
    """A login role of a test: its name, and a DSN that logs in as it."""

    name: str
    dsn: str

    def run(self, *statements: str | sql.Composed) -> None:
        """Each statement in its own transaction, as this role."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)

    def scalar(self, query: str | sql.Composed, params: Any = None) -> Any:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            row = conn.execute(query, params).fetchone()
        assert row is not None
        return row[0]


MakeRole = Callable[..., Role]


@pytest.fixture
def make_role(database_dsn: str) -> Iterator[MakeRole]:
    """``make_role("alice", "CREATEDB")``: a fresh login role (no superuser), dropped after the
    test with everything it owns or was granted in the test's database."""
    made: list[str] = []

    def make(label: str, *attributes: str) -> Role:
        name = f"simindex_t{next(_numbers)}_{label}"
        password = secrets.token_hex(12)
        superuser(
            database_dsn,
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {} {}").format(
                sql.Identifier(name),
                sql.Literal(password),
                sql.SQL(" ").join(sql.SQL(attribute) for attribute in attributes),
            ),
        )
        made.append(name)
        return Role(name, make_conninfo(database_dsn, user=name, password=password))

    yield make
    with psycopg.connect(database_dsn, autocommit=True) as conn:
        for name in reversed(made):
            conn.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(sql.Identifier(name)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def superuser(dsn: str, *statements: str | sql.Composed) -> None:
    """Each statement in its own transaction, as the test server's superuser."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


def scalar(dsn: str, query: str | sql.Composed, params: Any = None) -> Any:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(query, params).fetchone()
    assert row is not None
    return row[0]


def is_superuser(dsn: str, role: Role) -> bool:
    return bool(scalar(dsn, "SELECT rolsuper FROM pg_roles WHERE rolname = %s", (role.name,)))


def owned_table(dsn: str, owner: Role, create: str, rows: int = 20) -> None:
    """``create`` (a CREATE TABLE of ``docs``-like shape) run as ``owner``, with ``rows``
    rows of text: the app's table, not a superuser's."""
    superuser(
        dsn, sql.SQL("GRANT CREATE ON SCHEMA public TO {}").format(sql.Identifier(owner.name))
    )
    owner.run(create)
    if not rows:
        return
    values = ", ".join(
        f"({n}, 'the text of row {n} says {n % 7} things about {n % 5} subjects')"
        for n in range(1, rows + 1)
    )
    owner.run(f"INSERT INTO docs VALUES {values}")


def drop_event_triggers(dsn: str) -> None:
    """As if simindex had been migrated by a non-superuser: no event triggers."""
    superuser(
        dsn,
        "DROP EVENT TRIGGER IF EXISTS simindex_sql_drop_v1",
        "DROP EVENT TRIGGER IF EXISTS simindex_alter_table_v1",
    )
