"""``simindex.grant``: give a database role a right on simindex (docs/security.md
says who owns what and what each right allows)."""

from __future__ import annotations

from collections.abc import Sequence

from simindex._session import session
from simindex.db import privileges
from simindex.db.catalog import DEFAULT_SCHEMA, check_name, check_schema, read_index, store_of
from simindex.db.cluster_store import ClusterStore
from simindex.db.connection import Bind, PgConnection
from simindex.db.privileges import RIGHTS, GrantReport, IndexTables, Right
from simindex.db.statements import statement
from simindex.db.triggers import Triggers

__all__ = ["RIGHTS", "GrantReport", "Right", "grant"]


def grant(
    bind: Bind,
    role: str,
    right: Right,
    *,
    indexes: Sequence[str] | None = None,
    index_schema: str = DEFAULT_SCHEMA,
) -> GrantReport:
    """Give the database role ``role`` a right on simindex, now and for indexes made later.

    Parameters:
        role: an existing role's name.
        right: ``"reader"`` (query), ``"writer"`` (index its own writes in its transaction,
            :func:`simindex.sqlalchemy.track`; plain writes of an indexed table need no right),
            ``"worker"`` (``sync``, ``check``, ``repair``; also SELECT on the indexed tables,
            where the caller may grant it: the report lists the others) or ``"admin"``
            (create, build, drop, clusters: membership in the ``simindex_owner`` role).
        indexes: the indexes the right is for (their tables; a build keeps the rights, a
            worker also gets SELECT on their tables); None (the default): every index, now
            and made later. Not for ``"admin"``.

    The caller must be an admin (a superuser, or for ``"admin"`` one holding ADMIN OPTION on
    ``simindex_owner``). See docs/security.md.
    """
    check_schema(index_schema)
    if indexes is not None:
        if isinstance(indexes, str):
            raise TypeError("indexes must be a sequence of index names, not one string")
        if right == "admin":
            raise ValueError("the admin right is for every index (membership in the owner role)")
        names = [check_name(name) for name in indexes]
    with session(bind, index_schema) as conn:
        chosen = None if indexes is None else [_tables(conn, index_schema, n) for n in names]
        return privileges.grant(conn, index_schema, role, right, chosen)


def _tables(conn: PgConnection, schema: str, name: str) -> IndexTables:
    """Index ``name`` with the tables that hold its rows (its clusters', once made)."""
    info = read_index(conn, schema, name)
    triggers = Triggers(schema, name, info.source, store_of(info))
    tables = [*triggers.tables(), *triggers.store.side_tables()]
    clusters = ClusterStore(schema, name).table
    exists = conn.execute(
        statement("clusters_exists"), {"table": clusters.as_string(conn)}
    ).fetchone()
    if exists and exists[0]:
        tables.append(clusters)
    return IndexTables(name, tuple(tables))
