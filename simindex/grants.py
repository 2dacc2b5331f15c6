"""``simindex.grant``: give a database role a right on simindex (docs/security.md
says who owns what and what each right allows)."""

from __future__ import annotations

from simindex._session import session
from simindex.db import privileges
from simindex.db.catalog import DEFAULT_SCHEMA, check_schema
from simindex.db.connection import Bind
from simindex.db.privileges import RIGHTS, GrantReport, Right

__all__ = ["RIGHTS", "GrantReport", "Right", "grant"]


def grant(
    bind: Bind, role: str, right: Right, *, index_schema: str = DEFAULT_SCHEMA
) -> GrantReport:
    """Give the database role ``role`` a right on simindex, now and for indexes made later.

    Parameters:
        role: an existing role's name.
        right: ``"reader"`` (query), ``"writer"`` (index its own writes in its transaction,
            :func:`simindex.sqlalchemy.track`; plain writes of an indexed table need no right),
            ``"worker"`` (``sync``, ``check``, ``repair``; also SELECT on the indexed tables,
            where the caller may grant it: the report lists the others) or ``"admin"``
            (create, build, drop, clusters: membership in the ``simindex_owner`` role).

    The caller must be an admin (a superuser, or for ``"admin"`` one holding ADMIN OPTION on
    ``simindex_owner``). See docs/security.md.
    """
    check_schema(index_schema)
    with session(bind, index_schema) as conn:
        return privileges.grant(conn, index_schema, role, right)
