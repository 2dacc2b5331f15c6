"""Every SQL statement simindex runs, from the named blocks of the ``.sql`` files here.

A block starts with ``-- name: <name>``. Blocks are templates for psycopg's ``sql.SQL``:
``{placeholders}`` take identifiers or composed fragments (never user text), ``%(name)s``
take values. Literal braces are doubled; a literal percent sign is doubled only in blocks
run with values (DDL runs without, so its plpgsql ``%`` stays single).

A block run with values has its identifiers and literals filled in with their percent signs
doubled: psycopg reads ``%`` anywhere in such a query, even inside a quoted name.

A dollar-quoted part of a block (a function's body, ``$body$ ... $body$``) is filled in on its
own and quoted again with a tag that provably does not occur in what was filled in, so no
identifier (a column named ``$body$;DROP ...``) can end a body early.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from importlib import resources
from typing import Any

from psycopg import sql

from simindex.db.connection import PgConnection

_BLOCK = re.compile(r"^-- name: (\S+)[^\n]*\n(.*?)(?=^-- name: |\Z)", re.MULTILINE | re.DOTALL)
_DOLLAR_QUOTED = re.compile(r"(\$[A-Za-z_]*\$)(.*?)\1", re.DOTALL)
_VALUES = re.compile(r"%(\(\w+\))?[sbt]")


class _PercentDoubled(sql.Composable):
    """A name or value in a statement run with values: ``%`` doubled, read back as one."""

    def as_bytes(self, context: Any = None) -> bytes:
        return bytes(self._obj.as_bytes(context)).replace(b"%", b"%%")


class _WithValues(sql.Composed):
    """A statement whose ``%(name)s`` placeholders are its values: filled into another
    statement run with values, it stays as it is (its names were doubled already)."""


def _doubled(part: sql.Composable) -> sql.Composable:
    if isinstance(part, _WithValues):
        return part
    if isinstance(part, sql.Composed):
        return sql.Composed([_doubled(each) for each in part._obj])
    if isinstance(part, (sql.Identifier, sql.Literal, sql.SQL)):
        return _PercentDoubled(part)
    return part  # a Placeholder stays one


class DollarQuoted(sql.Composable):
    """``inner`` between dollar quotes whose tag is not found in it once it is rendered."""

    def __init__(self, inner: sql.Composable, tag: str = "body") -> None:
        super().__init__(inner)
        self._tag = tag

    def as_bytes(self, context: Any = None) -> bytes:
        inner = self._obj.as_bytes(context)
        return safe_dollar_quote(bytes(inner), self._tag)


def safe_dollar_quote(body: bytes, tag: str = "body") -> bytes:
    """``body`` quoted as ``$tag$body$tag$``, the tag numbered until the body cannot end early.

    PostgreSQL ends a dollar-quoted string at the first occurrence of its tag, so the tag must
    first occur where the closing one starts, including across the seam.
    """
    number = 0
    while True:
        quote = f"${tag}{number or ''}$".encode()
        if (body + quote).find(quote) == len(body):
            return quote + body + quote
        number += 1


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
    """The named block with its placeholders filled by identifiers or composed SQL; its
    dollar-quoted parts quoted afresh (see :class:`DollarQuoted`)."""
    text = _blocks()[block]
    values = _VALUES.search(text) is not None
    if values:
        parts = {name: _doubled(part) for name, part in parts.items()}
    pieces: list[sql.Composable] = []
    end = 0
    for match in _DOLLAR_QUOTED.finditer(text):
        pieces.append(sql.SQL(text[end : match.start()]).format(**parts))
        tag = match.group(1).strip("$") or "body"
        pieces.append(DollarQuoted(sql.SQL(match.group(2)).format(**parts), tag))
        end = match.end()
    pieces.append(sql.SQL(text[end:]).format(**parts))
    return _WithValues(pieces) if values else sql.Composed(pieces)


def run(conn: PgConnection, statements: Iterable[sql.Composed]) -> None:
    """Execute statements without values, one after another (see the ``*_statements`` methods:
    the same statements also become text for an Alembic ``--sql`` script)."""
    for composed in statements:
        conn.execute(composed)
