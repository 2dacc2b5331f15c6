"""What an index may answer a role: never more rows than a bound by default, and never a key
of a row the role could not SELECT from the source table.

Every query function a reader may call returns at most :data:`DEFAULT_MAX_ROWS` rows unless
the caller asks for more (``max_rows``; NULL is every row). Its cost is governed by the
caller's own ``work_mem``, ``statement_timeout`` and ``temp_file_limit``: no function sets
them. ``pairs`` (quadratic in a group of identical rows) is not a reader's right.
"""

from __future__ import annotations

from psycopg import sql

DEFAULT_MAX_ROWS = 1000
"""The default ``max_rows`` of the SQL query functions."""


def max_rows() -> sql.Literal:
    return sql.Literal(DEFAULT_MAX_ROWS)
