"""Turn what a user hands simindex (an Engine, a Connection or a DSN) into a Connection.

Every public entry point accepts all three, so the conversion lives here, once. Underneath is
always psycopg 3: bulk writes use its COPY support. A DSN string gets one pooled Engine per
string for the life of the process (opening a connection costs ten times a query), disposed of
at exit or by :func:`dispose_engines`; inside :func:`single_use_dsns` (a process that makes a call
or two and exits: the command line), a DSN string's :func:`transaction` is a psycopg connection
of its own instead, and SQLAlchemy is not even imported. SQLAlchemy is imported only when a
caller hands in an Engine or a Connection, or a DSN string needs an Engine.

Every connection simindex works on has its ``search_path`` pinned to ``pg_catalog, pg_temp``
while simindex uses it (see :func:`pinned`): no function, operator or type a statement names
resolves on a caller's path, where another role could have put an exact-type shadow of a
built-in. A caller's own connection gets its own path back afterwards.
"""

from __future__ import annotations

import atexit
import re
import select
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any, TypeAlias

import psycopg
from psycopg.conninfo import conninfo_to_dict

from simindex.db.redaction import redact

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

Bind: TypeAlias = "Engine | Connection | str"
"""What every public entry point accepts: an Engine, a Connection or a DSN string."""
PgConnection = psycopg.Connection[tuple[Any, ...]]
"""A psycopg connection as simindex uses it (tuple rows)."""

PINNED_SEARCH_PATH = "pg_catalog, pg_temp"
"""The search_path of every statement simindex sends (simindex's own schema is always named)."""

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
            libpq untouched. The engine made for a string is kept, pooled, for the next call
            with the same string.

    Raises ValueError for a string that is neither, and for an Engine or Connection whose
    driver is not psycopg 3. The connection's ``search_path`` is :data:`PINNED_SEARCH_PATH`
    inside the block: for a caller's Connection, in their transaction (begun here if none
    was), and theirs again when the block ends; an Engine's connection goes back to its pool
    with the path it had.
    """
    if isinstance(bind, str):
        with engine_for(bind).connect() as connection:  # pinned once, when it was opened
            # At rest in autocommit (see engine_for): transactions here, autocommit again
            # when it is checked in.
            raw_connection(connection).autocommit = False
            yield connection
        return
    from sqlalchemy.engine import Connection, Engine  # the caller's bind has loaded it

    if isinstance(bind, Connection):
        _check_driver(bind.engine)
        if not bind.in_transaction():
            bind.begin()  # so that the pin is the transaction's, and the caller's commit ours
        with pinned(raw_connection(bind)):
            yield bind
    elif isinstance(bind, Engine):
        _check_driver(bind)
        with bind.connect() as connection, _pinned_for_session(connection):
            yield connection
    else:
        raise TypeError(
            f"expected a SQLAlchemy Engine or Connection or a DSN string, got {type(bind).__name__}"
        )


@contextmanager
def transaction(bind: Bind) -> Iterator[PgConnection]:
    """The psycopg connection under ``bind``, in a transaction committed here unless the caller
    handed in a Connection (then it is theirs to commit)."""
    if isinstance(bind, str) and _single_use and _libpq_string(bind):
        conn = _open_pinned(bind)
        try:
            yield conn
            conn.commit()
        finally:
            conn.close()  # a transaction left open is rolled back
        return
    with connect(bind) as connection:
        if not connection.in_transaction():
            connection.begin()
        yield raw_connection(connection)
        if connection is not bind:  # a caller's Connection (yielded as it is) is theirs to commit
            connection.commit()


_single_use = False


@contextmanager
def single_use_dsns() -> Iterator[None]:
    """Inside the block, :func:`transaction` on a libpq DSN string opens a psycopg connection
    of its own (its ``search_path`` pinned when opened) and closes it after, instead of taking
    one from the DSN's pooled Engine: for a process that makes a call or two and exits (the
    command line), to which SQLAlchemy's import costs more than the pool saves. A
    ``postgresql+psycopg://`` URL, which is SQLAlchemy's, still goes through an Engine."""
    global _single_use
    before, _single_use = _single_use, True
    try:
        yield
    finally:
        _single_use = before


def _open_pinned(dsn: str) -> PgConnection:
    """A new psycopg connection to the libpq string ``dsn``, pinned for its whole life."""
    conn = psycopg.connect(dsn)
    try:
        _pin_new_connection(conn, None)
    except BaseException:
        conn.close()
        raise
    return conn


def autocommit_connection(bind: Engine | str, *, pin: bool = True) -> Lent:
    """A psycopg connection from the pool of ``bind`` (an Engine or a DSN string), in
    autocommit while it is lent (a context manager): for reads, which then need no BEGIN or
    COMMIT round trips. Taken without a SQLAlchemy Connection around it, which a query by key
    would notice.

    ``pin=False`` lends a caller's Engine's connection on the caller's own search_path, with
    no round trip to pin it and set it back: only for statements that name every function,
    operator and type with its schema (the caller pins it with :func:`pinned` for any other).
    A DSN string's connection is pinned for its whole life either way."""
    return Lent(bind, pin)


class Lent:
    """:func:`autocommit_connection`'s context manager: a class, not a generator, since a
    query by key pays for each layer around it. A DSN string's connections rest in
    autocommit (:func:`engine_for`): lending one sets nothing; a caller's Engine's is set to
    autocommit and back (each a call into psycopg, no round trip)."""

    __slots__ = ("_bind", "_pin", "_pinned", "_pooled", "_set_back")

    def __init__(self, bind: Engine | str, pin: bool) -> None:
        self._bind = bind
        self._pin = pin
        self._pooled: Any = None
        self._pinned: Any = None
        self._set_back: PgConnection | None = None

    def __enter__(self) -> PgConnection:
        bind = self._bind
        if isinstance(bind, str):
            pooled = engine_for(bind).raw_connection()  # simindex's own: psycopg, pinned
        else:
            _check_driver(bind)
            pooled = bind.raw_connection()
        try:
            conn = pooled.driver_connection
            if not isinstance(conn, psycopg.Connection):
                raise TypeError("simindex needs the psycopg (version 3) driver")
            if not conn.autocommit:
                conn.autocommit = True
                self._set_back = conn
            if not (isinstance(bind, str) or not self._pin):
                # The caller's pool: their path back afterwards. A DSN string's connection
                # was pinned once, when it was opened; unpinned: see autocommit_connection.
                self._pinned = pinned(conn)
                self._pinned.__enter__()
        except BaseException:
            self._release(pooled)
            raise
        self._pooled = pooled
        return conn

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> None:
        pooled, self._pooled = self._pooled, None
        try:
            if self._pinned is not None:
                held, self._pinned = self._pinned, None
                held.__exit__(kind, error, traceback)
        finally:
            self._release(pooled)

    def _release(self, pooled: Any) -> None:
        conn, self._set_back = self._set_back, None
        try:
            if conn is not None and not conn.closed:
                conn.autocommit = False
        finally:
            pooled.close()


@contextmanager
def in_transaction(connection: Connection) -> Iterator[PgConnection]:
    """The psycopg connection under a caller's Connection, in their transaction (begun here if
    none was), left open and not pinned: for statements that name every function, operator
    and type with its schema (see :func:`autocommit_connection`)."""
    _check_driver(connection.engine)
    if not connection.in_transaction():
        connection.begin()
    yield raw_connection(connection)


def raw_connection(connection: Connection) -> PgConnection:
    """The psycopg connection under a SQLAlchemy one."""
    raw = connection.connection.driver_connection
    if not isinstance(raw, psycopg.Connection):
        raise TypeError("simindex needs the psycopg (version 3) driver")
    return raw


_engines: dict[str, Engine] = {}
_engines_lock = threading.Lock()


def engine_for(dsn: str) -> Engine:
    """The process's pooled Engine for the DSN string ``dsn`` (made on first use)."""
    engine = _engines.get(dsn)
    if engine is None:
        from sqlalchemy import event

        made = _engine_for(dsn)
        # First among the connect listeners: before SQLAlchemy's own first statements.
        event.listen(made, "connect", _pin_new_connection, insert=True)
        event.listen(made, "checkout", _check_idle_connection)
        event.listen(made, "connect", _autocommit_at_rest)  # after the pin's commit
        event.listen(made, "checkin", _autocommit_at_rest)
        with _engines_lock:
            engine = _engines.setdefault(dsn, made)
        if engine is not made:
            made.dispose()
    return engine


@atexit.register
def dispose_engines() -> None:
    """Close the pooled connections of every DSN string seen so far (at exit, or before a
    database they point at is dropped or copied)."""
    with _engines_lock:
        engines = list(_engines.values())
        _engines.clear()
    for engine in engines:
        engine.dispose()


_callers_paths: weakref.WeakKeyDictionary[PgConnection, str] = weakref.WeakKeyDictionary()

_PIN = (
    "WITH caller AS MATERIALIZED (SELECT pg_catalog.current_setting('search_path') AS path) "
    "SELECT caller.path, pg_catalog.set_config('search_path', %(pinned)s, %(local)s) FROM caller"
)
_RESTORE = "SELECT pg_catalog.set_config('search_path', %(path)s, %(local)s)"


@contextmanager
def pinned(conn: PgConnection) -> Iterator[PgConnection]:
    """``conn`` with its ``search_path`` pinned to :data:`PINNED_SEARCH_PATH` inside the block,
    and the path it had before set again after it.

    In a transaction the pin is the transaction's own (``set_config(..., true)``): a rollback,
    or a rollback to a savepoint taken before the block, undoes it too; a transaction that
    failed inside the block is left to its rollback. In autocommit the pin is the session's
    until the block ends. Nested blocks pin once.
    """
    if conn in _callers_paths:
        yield conn
        return
    local = not conn.autocommit
    row = conn.execute(_PIN, {"pinned": PINNED_SEARCH_PATH, "local": local}).fetchone()
    assert row is not None
    _callers_paths[conn] = str(row[0])
    try:
        yield conn
    finally:
        path = _callers_paths.pop(conn, None)
        status = conn.info.transaction_status
        usable = (local and status == psycopg.pq.TransactionStatus.INTRANS) or (
            not local and conn.autocommit and status == psycopg.pq.TransactionStatus.IDLE
        )
        if path is not None and not conn.closed and usable:
            conn.execute(_RESTORE, {"path": path, "local": local})


def callers_search_path(conn: PgConnection) -> str | None:
    """The ``search_path`` ``conn`` had before simindex pinned it (what a table name the
    caller gave resolves on), or None if it is not pinned."""
    return _callers_paths.get(conn)


@contextmanager
def on_callers_search_path(conn: PgConnection) -> Iterator[None]:
    """Inside a pinned block, the caller's own path for a statement that must resolve a name
    the caller gave (a table), and that names every function and operator it uses."""
    path = _callers_paths.get(conn)
    if path is None:
        yield
        return
    local = not conn.autocommit
    conn.execute(_RESTORE, {"path": path, "local": local})
    try:
        yield
    finally:
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.INERROR:
            conn.execute(_RESTORE, {"path": PINNED_SEARCH_PATH, "local": local})


@contextmanager
def _pinned_for_session(connection: Connection) -> Iterator[None]:
    """A connection of a caller's Engine pinned for as long as simindex holds it: its path
    set for the session (simindex commits several transactions on it), and set back before
    it returns to the pool (or the connection is discarded, if that fails)."""
    raw = raw_connection(connection)
    row = raw.execute(_PIN, {"pinned": PINNED_SEARCH_PATH, "local": False}).fetchone()
    assert row is not None
    raw.commit()
    path = str(row[0])
    _callers_paths[raw] = path
    try:
        yield
    finally:
        _callers_paths.pop(raw, None)
        try:
            if connection.in_transaction():
                connection.rollback()
            if not raw.closed:
                raw.rollback()
                raw.execute(_RESTORE, {"path": path, "local": False})
                raw.commit()
        except psycopg.Error:
            with suppress(Exception):
                connection.invalidate()


def _pin_new_connection(dbapi_connection: Any, record: Any) -> None:
    """A connection of a DSN string's Engine (simindex's own) is pinned for its whole life."""
    if isinstance(dbapi_connection, psycopg.Connection) and dbapi_connection not in _callers_paths:
        row = dbapi_connection.execute(
            _PIN, {"pinned": PINNED_SEARCH_PATH, "local": False}
        ).fetchone()
        dbapi_connection.commit()
        assert row is not None
        _callers_paths[dbapi_connection] = str(row[0])


def _autocommit_at_rest(dbapi_connection: Any, record: Any) -> None:
    """A connection of a DSN string's Engine rests in its pool in autocommit, from when it is
    opened and whenever it goes back (after the pool's rollback): a query lent it
    (:class:`Lent`) sets nothing, and :func:`connect` sets it out of autocommit for the
    transactions it runs."""
    if (
        isinstance(dbapi_connection, psycopg.Connection)
        and not dbapi_connection.autocommit  # set out of it by connect(), or by SQLAlchemy
        and not dbapi_connection.closed
        and dbapi_connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    ):
        dbapi_connection.autocommit = True


def _check_idle_connection(dbapi_connection: Any, record: Any, proxy: Any) -> None:
    """A pooled connection the server closed while it was idle (a restart, a terminated
    backend) is replaced, not lent. An idle connection has nothing to read unless the server
    sent something (a notice of its end, or a notification): only then is it pinged, so the
    usual checkout costs no round trip."""
    if not isinstance(dbapi_connection, psycopg.Connection):
        return
    try:
        if dbapi_connection.closed:
            raise psycopg.OperationalError("the connection is closed")
        readable, _, _ = select.select([dbapi_connection.pgconn.socket], [], [], 0)
        if readable:
            dbapi_connection.execute("SELECT 1")  # a ping; the literal needs no SQL file
            dbapi_connection.rollback()
    except (psycopg.Error, OSError) as exc:
        from sqlalchemy.exc import DisconnectionError  # only here: a checkout pays no import

        raise DisconnectionError(str(exc)) from exc


def _engine_for(dsn: str) -> Engine:
    from sqlalchemy import create_engine
    from sqlalchemy.exc import ArgumentError

    if not _libpq_string(dsn):
        try:
            return create_engine(dsn, use_native_hstore=False)
        except (ArgumentError, ValueError) as exc:  # their messages may quote the URL
            raise ValueError(
                f"not a valid {_SQLALCHEMY_URL}:// URL: {redact(str(exc), dsn)}"
            ) from None
    # Handing the string to libpq itself keeps every libpq form working (socket directories,
    # service files, multiple hosts), which a round trip through a SQLAlchemy URL would not.
    # No hstore lookup on connect: psycopg's type query compares oid = regtype unqualified.
    return create_engine(
        f"{_SQLALCHEMY_URL}://", creator=lambda: psycopg.connect(dsn), use_native_hstore=False
    )


def _libpq_string(dsn: str) -> bool:
    """Whether ``dsn`` is for libpq (True) or a SQLAlchemy URL (False); ValueError for
    anything else, or a libpq string that does not parse (with no password in the message)."""
    match = _SCHEME.match(dsn)
    scheme = match.group(1).lower() if match else None
    if scheme == _SQLALCHEMY_URL:
        return False
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
        # libpq quotes the part of the string it stopped at, which may be the password:
        # only the names of its parameters are kept (the cause, which has it all, is not).
        raise ValueError(f"not a valid libpq connection string: {_parse_error(exc)}") from None
    return True


_QUOTED = re.compile(r'"([^"]*)"')


def _parse_error(exc: psycopg.Error) -> str:
    keywords = {option.keyword.decode() for option in psycopg.pq.Conninfo.get_defaults()}

    def kept(match: re.Match[str]) -> str:
        quoted = match.group(1)
        plain = quoted in keywords or not any(character.isalnum() for character in quoted)
        return match.group(0) if plain else '"..."'

    return " ".join(_QUOTED.sub(kept, str(exc)).split())


def _check_driver(engine: Engine) -> None:
    dialect = engine.dialect
    if (dialect.name, dialect.driver) != ("postgresql", "psycopg"):
        raise ValueError(
            "simindex runs on PostgreSQL through psycopg 3 (postgresql+psycopg://), "
            f"got an engine for {dialect.name}+{dialect.driver}"
        )
