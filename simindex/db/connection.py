"""Turn what a user hands simindex (an Engine, a Connection or a DSN) into a Connection.

Every public entry point accepts all three, so the conversion lives here, once. Underneath is
always psycopg 3: bulk writes use its COPY support.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool

Bind = Engine | Connection | str
"""What every public entry point accepts: an Engine, a Connection or a DSN string."""
PgConnection = psycopg.Connection[tuple[Any, ...]]
"""A psycopg connection as simindex uses it (tuple rows)."""

_SQLALCHEMY_URL = "postgresql+psycopg"
_LIBPQ_SCHEMES = ("postgresql", "postgres")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


@contextmanager
def connect(bind: Engine | Connection | str) -> Iterator[Connection]:
    """A SQLAlchemy Connection on psycopg 3 for ``bind``.

    Parameters:
        bind: a Connection, used as it is (in the caller's transaction, left open); an Engine,
            from which a connection is taken and closed on exit; or a string: a SQLAlchemy URL
            (``postgresql+psycopg://...``), or anything libpq accepts (a ``postgresql://`` URI
            or ``key=value`` pairs such as ``host=/run/postgresql dbname=app``), which goes to
            libpq untouched. An engine made from a string is disposed of on exit.

    Raises ValueError for a string that is neither, and for an Engine or Connection whose
    driver is not psycopg 3.
    """
    if isinstance(bind, Connection):
        _check_driver(bind.engine)
        yield bind
    elif isinstance(bind, Engine):
        _check_driver(bind)
        with bind.connect() as connection:
            yield connection
    elif isinstance(bind, str):
        engine = _engine_for(bind)
        try:
            with engine.connect() as connection:
                yield connection
        finally:
            engine.dispose()
    else:
        raise TypeError(
            f"expected a SQLAlchemy Engine or Connection or a DSN string, got {type(bind).__name__}"
        )


@contextmanager
def transaction(bind: Bind) -> Iterator[PgConnection]:
    """The psycopg connection under ``bind``, in a transaction committed here unless the caller
    handed in a Connection (then it is theirs to commit)."""
    with connect(bind) as connection:
        if not connection.in_transaction():
            connection.begin()
        yield raw_connection(connection)
        if not isinstance(bind, Connection):
            connection.commit()


def raw_connection(connection: Connection) -> PgConnection:
    """The psycopg connection under a SQLAlchemy one."""
    raw = connection.connection.driver_connection
    if not isinstance(raw, psycopg.Connection):
        raise TypeError("simindex needs the psycopg (version 3) driver")
    return raw


def _engine_for(dsn: str) -> Engine:
    match = _SCHEME.match(dsn)
    scheme = match.group(1).lower() if match else None
    if scheme == _SQLALCHEMY_URL:
        return create_engine(dsn, poolclass=NullPool)
    if scheme is not None and scheme not in _LIBPQ_SCHEMES:
        raise ValueError(
            f"expected a {_SQLALCHEMY_URL}:// URL or a libpq connection string, "
            f"got a {scheme}:// URL (simindex runs on psycopg 3)"
        )
    if not dsn.strip():
        raise ValueError("expected a connection string, got an empty one")
    try:
        conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise ValueError(f"not a valid libpq connection string: {exc}") from exc
    # Handing the string to libpq itself keeps every libpq form working (socket directories,
    # service files, multiple hosts), which a round trip through a SQLAlchemy URL would not.
    return create_engine(
        f"{_SQLALCHEMY_URL}://", creator=lambda: psycopg.connect(dsn), poolclass=NullPool
    )


def _check_driver(engine: Engine) -> None:
    dialect = engine.dialect
    if (dialect.name, dialect.driver) != ("postgresql", "psycopg"):
        raise ValueError(
            "simindex runs on PostgreSQL through psycopg 3 (postgresql+psycopg://), "
            f"got an engine for {dialect.name}+{dialect.driver}"
        )
