"""Who owns simindex's objects, and what each right lets a role do with them.

simindex's schema and everything in it belong to ``simindex_owner``, a NOLOGIN role without
attributes that the migration creates. Whoever creates, builds or drops an index acts as that
role for simindex's own objects (``SET LOCAL ROLE``, so they must be a member: the *admin*
right) and as themselves for the source table (its triggers). The rights a role can be given:

``reader``  query: SELECT on simindex's tables (the catalog, side tables, queues' lengths);
            the query functions run with the caller's rights.
``writer``  also index its own writes in its transaction (``simindex.sqlalchemy.track``):
            write the side tables, queues and failed items. A plain writer of an indexed
            table needs no right at all: the triggers run as the owner role.
``worker``  also ``sync``, ``check`` and ``repair``: the writer's rights, and SELECT on every
            indexed table (granted here where the caller may grant it).
``admin``   create, build, drop, clusters, migrate: membership in the owner role.

Rights on tables made later come from ``ALTER DEFAULT PRIVILEGES FOR ROLE simindex_owner``, so
they are recorded in PostgreSQL itself (``\\ddp`` shows them) and apply to every index.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

import psycopg
from psycopg import sql

from simindex.db.connection import PgConnection
from simindex.db.statements import statement
from simindex.errors import MissingRightError, SchemaNotMigratedError

OWNER = "simindex_owner"
"""The NOLOGIN role that owns simindex's schema and every object in it."""

_log = logging.getLogger("simindex")

Right = Literal["reader", "writer", "worker", "admin"]
RIGHTS: tuple[Right, ...] = ("reader", "writer", "worker", "admin")


def as_owner(statements: list[sql.Composed]) -> list[sql.Composed]:
    """``statements`` run as the owner role, and the caller's role back afterwards (so that,
    in an app's migration run under ``SET ROLE``, the role is the one it was)."""
    return [*become_owner(), *statements, *back_to_caller()]


def type_usage(key_type: str) -> sql.Composed:
    """Let the owner role use ``key_type`` (USAGE on its schema), or stop, naming the GRANT."""
    return statement("owner_type_usage", key_type=sql.Literal(key_type), owner=sql.Literal(OWNER))


def become_owner() -> list[sql.Composed]:
    """Act as the owner role until :func:`back_to_caller` (or the transaction's end)."""
    return [statement("role_remember"), statement("role_become", role=sql.Identifier(OWNER))]


def back_to_caller() -> list[sql.Composed]:
    """The role :func:`become_owner` remembered."""
    return [statement("role_restore")]


_warned: set[tuple[str, str, int, str, str]] = set()
_quiet: list[str] = []


@contextmanager
def superuser_warning_off(why: str) -> Iterator[None]:
    """No superuser warning while the block runs: the demo's own throwaway cluster, or
    ``repair``'s sync, which is not the worker the warning is about."""
    _quiet.append(why)
    try:
        yield
    finally:
        _quiet.remove(why)


def check_worker(conn: PgConnection, schema: str, what: str = "sync") -> None:
    """Raise :class:`MissingRightError` unless the current role holds the worker right on
    simindex's schema ``schema``: without it every batch would fail on simindex's own tables,
    which says nothing about the indexes (none is broken)."""
    catalog = sql.Identifier(schema, "indexes").as_string(conn)
    row = conn.execute(
        statement("role_may_work"), {"schema": schema, "catalog": catalog}
    ).fetchone()
    if row is not None and row[1] is None:
        raise SchemaNotMigratedError.of(schema)
    if row is None or not row[1]:
        role = row[0] if row else "this role"
        raise MissingRightError(
            f"role {role!r} lacks the worker right that {what} needs (it may not write "
            f"simindex's queues and tables in schema {schema!r}); an admin gives it with "
            f"`simindex grant {role} --worker` (Python: simindex.grant(engine, {role!r}, "
            f"'worker')); nothing was changed, no index is broken"
        )


def warn_if_superuser(conn: PgConnection, what: str) -> None:
    """Log a warning when ``what`` (sync, build) runs as a superuser: it needs far less. Once
    per process for each database and role, so a loop of builds does not repeat it; called
    once the work went well, so that it never stands in front of an error."""
    if _quiet:
        return
    info = conn.info
    seen = (what, info.host, info.port, info.dbname, info.user)
    if seen in _warned:
        return
    row = conn.execute(statement("role_is_superuser")).fetchone()
    if row and row[0]:
        _warned.add(seen)
        _log.warning(
            "simindex %s runs as a superuser; an ordinary role with the %s right is enough "
            "(simindex grant ROLE --%s)",
            what,
            "worker" if what == "sync" else "admin",
            "worker" if what == "sync" else "admin",
        )


@dataclass(slots=True)
class GrantReport:
    """What :func:`grant_statements` could not do itself: indexed tables whose SELECT right
    only their owner may give (a worker reads them)."""

    tables_not_granted: list[str] = field(default_factory=list)


def grant(conn: PgConnection, schema: str, role: str, right: Right) -> GrantReport:
    """Give ``role`` the ``right`` on simindex's schema ``schema`` (see the module's table),
    now and for indexes made later. Runs as the owner role; the caller must be an admin (and,
    for ``admin``, a superuser or hold ADMIN OPTION on the owner role)."""
    if right not in RIGHTS:
        raise ValueError(f"right must be one of {', '.join(RIGHTS)}, got {right!r}")
    if not isinstance(role, str) or not role:
        raise TypeError(f"role must be a role's name, got {role!r}")
    exists = conn.execute(statement("role_exists"), {"role": role}).fetchone()
    if not (exists and exists[0]):
        raise ValueError(f"there is no role named {role!r}")
    grantee = sql.Identifier(role)
    report = GrantReport()
    if right == "admin":
        conn.execute(statement("grant_owner", owner=sql.Identifier(OWNER), role=grantee))
        return report
    parts = {
        "schema": sql.Identifier(schema),
        "catalog": sql.Identifier(schema, "indexes"),
        "versions": sql.Identifier(schema, "alembic_version"),
        "owner": sql.Identifier(OWNER),
        "role": grantee,
    }
    blocks = ["grant_reader"] if right == "reader" else ["grant_reader", "grant_writer"]
    if right == "worker":
        blocks.append("grant_worker")
        parts["health"] = sql.Identifier(schema, "record_health_v1")
    for composed in as_owner([statement(block, **parts) for block in blocks]):
        conn.execute(composed)
    if right == "worker":
        for (table,) in conn.execute(
            statement("grant_sources", catalog=sql.Identifier(schema, "indexes"))
        ).fetchall():
            try:
                with conn.transaction():  # a savepoint: a refusal leaves the rest granted
                    conn.execute(
                        sql.SQL("GRANT SELECT ON TABLE {} TO {}").format(sql.SQL(table), grantee)
                    )
            except psycopg.errors.InsufficientPrivilege:
                report.tables_not_granted.append(table)
    return report
