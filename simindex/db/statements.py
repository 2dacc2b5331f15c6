"""Every SQL statement simindex runs, from the named blocks of the ``.sql`` files here.

A block starts with ``-- name: <name>``. Blocks are templates for psycopg's ``sql.SQL``:
``{placeholders}`` take identifiers or composed fragments (never user text), ``%(name)s``
take values. Literal braces are doubled; a literal percent sign is doubled only in blocks
run with values (DDL runs without, so its plpgsql ``%`` stays single).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from importlib import resources

from psycopg import sql

from simindex.db.connection import PgConnection

_BLOCK = re.compile(r"^-- name: (\S+)[^\n]*\n(.*?)(?=^-- name: |\Z)", re.MULTILINE | re.DOTALL)


@functools.cache
def _blocks() -> dict[str, str]:
    blocks: dict[str, str] = {}
    for entry in resources.files("simindex.db.sql").iterdir():
        if entry.name.endswith(".sql"):
            for name, body in _BLOCK.findall(entry.read_text(encoding="utf-8")):
                if name in blocks:
                    raise RuntimeError(f"SQL block {name!r} is defined twice")
                blocks[name] = body.strip()
    return blocks


def statement(block: str, /, **parts: sql.Composable) -> sql.Composed:
    """The named block with its placeholders filled by identifiers or composed SQL."""
    return sql.SQL(_blocks()[block]).format(**parts)


def run(conn: PgConnection, statements: Iterable[sql.Composed]) -> None:
    """Execute statements without values, one after another (see the ``*_statements`` methods:
    the same statements also become text for an Alembic ``--sql`` script)."""
    for composed in statements:
        conn.execute(composed)
