"""The app's table an index reads: found, checked and described before anything is created."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.abc import Buffer
from psycopg.adapt import Loader
from psycopg.types import datetime as datetime_types

from simindex.db.connection import PgConnection, on_callers_search_path
from simindex.db.statements import statement
from simindex.errors import SourceError

# Type categories (pg_type.typcategory) a key may not have: arrays, composites, pseudo-types.
_NOT_SCALAR = {"A": "an array", "C": "a composite", "P": "a pseudo-type"}


@dataclass(frozen=True, slots=True)
class Source:
    """A checked source table: where it is, its key and text columns and the key's SQL type.

    The names are those of now; PostgreSQL knows the table by ``oid`` and the columns by
    number (``*_attnum``), which renames do not change. A column's *position* counts the
    table's columns up to it, dropped ones left out: the position a ``FROM t AS x (c1, c2)``
    alias list renames. Zero means not known (an offline migration's script).
    """

    oid: int
    schema: str
    table: str
    key_column: str
    key_type: str
    """The SQL type simindex stores keys as, typmod-exact and schema-qualified: the key
    column's type, or a domain's base type, so that no CHECK of the domain (its owner's code)
    ever runs as simindex's owner role or as a worker (see ``source_columns``)."""
    text_column: str
    key_attnum: int = 0
    text_attnum: int = 0
    key_position: int = 0
    text_position: int = 0
    key_type_id: int = 0
    key_typmod: int = -1
    text_type_id: int = 0

    @property
    def identifier(self) -> sql.Identifier:
        """The table's name, qualified unless ``schema`` is empty (not resolved yet, as in an
        offline migration: PostgreSQL resolves it through the search_path when the SQL runs)."""
        if not self.schema:
            return sql.Identifier(self.table)
        return sql.Identifier(self.schema, self.table)


def describe(
    conn: PgConnection,
    table: str,
    column: str,
    *,
    schema: str | None = None,
    key: str | None = None,
) -> Source:
    """Resolve and validate a source; raises :class:`SourceError` naming what is wrong."""
    for label, value in (("table", table), ("column", column), ("key", key), ("schema", schema)):
        if value is not None and (not isinstance(value, str) or not value):
            raise TypeError(f"{label} must be a non-empty str, got {value!r}")
    qualified = sql.Identifier(schema, table) if schema else sql.Identifier(table)
    with on_callers_search_path(conn):
        resolved = conn.execute(
            statement("source_table_oid"), {"qualified": qualified.as_string(conn)}
        ).fetchone()
    found = None
    if resolved is not None and resolved[0] is not None:
        oid = int(resolved[0])
        found = conn.execute(statement("source_table"), {"oid": oid}).fetchone()
    if found is None:
        where = f"schema {schema!r}" if schema else "the search_path"
        raise SourceError(f"table {table!r} does not exist in {where}")
    found_schema, found_table, kind, parents, children = found
    _check_alone(f"{found_schema}.{found_table}", kind, parents, children)
    columns = {
        str(row[0]): _Column(*row[1:])
        for row in conn.execute(statement("source_columns"), {"oid": oid})
    }
    if column not in columns:
        raise SourceError(
            f"column {column!r} does not exist in {found_schema}.{found_table}; "
            f"it has {sorted(columns)}"
        )
    text = columns[column]
    if text.category != "S":
        raise SourceError(
            f"column {column!r} is {text.type}; a text column (text, varchar, "
            "citext, ...) is needed"
        )
    if not text.text_by_builtin_means:
        raise SourceError(
            f"column {column!r} is {text.type}, whose cast to text is a function a "
            "non-superuser wrote; simindex reads texts with PostgreSQL's own casts only"
        )
    key_column = key if key is not None else _primary_key(conn, oid, found_table)
    if key_column not in columns:
        raise SourceError(f"key column {key_column!r} does not exist in {found_table}")
    if key is not None and key not in _unique_columns(conn, oid, found_table):
        raise SourceError(
            f"key column {key!r} has no unique index on {found_table} (or only a deferrable "
            "one); a key must identify one row"
        )
    found_key = columns[key_column]
    if found_key.category in _NOT_SCALAR or not found_key.keyable:
        what = _NOT_SCALAR.get(found_key.category, "a type without a default btree operator class")
        raise SourceError(
            f"key column {key_column!r} is {found_key.type}, {what}; a key must be one value "
            "that can be sorted and compared (an integer, text, uuid, ... type)"
        )
    if not _comparable(conn, found_key.stored_type):
        raise SourceError(
            f"key column {key_column!r} is {found_key.type}, whose = and < operators are not "
            "in pg_catalog (nor reachable through exactly one implicit cast), where simindex's "
            "SQL functions look; key the index on a built-in type, e.g. a generated text column"
        )
    if not found_key.not_null:
        # A NULL key names no row: its row could be neither queued nor found again.
        raise SourceError(
            f"key column {key_column!r} of {found_table} allows NULL; make it NOT NULL or name "
            "another key"
        )
    return Source(
        int(oid),
        str(found_schema),
        str(found_table),
        key_column,
        str(found_key.stored_type),
        column,
        key_attnum=found_key.attnum,
        text_attnum=text.attnum,
        key_position=found_key.position,
        text_position=text.position,
        key_type_id=found_key.type_id,
        key_typmod=found_key.typmod,
        text_type_id=text.type_id,
    )


def _check_alone(table: str, kind: str, parents: list[str], children: list[str]) -> None:
    """A source is a plain table outside any inheritance or partitioning tree: statement
    triggers fire for the table a statement names only, so a write straight into a partition
    or child, or through a parent, would bypass the index."""
    if kind == "p":
        raise SourceError(
            f"{table} is a partitioned table: simindex's triggers would not see writes straight "
            "into its partitions, nor ATTACH, DETACH, TRUNCATE or DROP of one; index a plain table"
        )
    if kind != "r":
        raise SourceError(f"{table} is not a table (relkind {kind!r})")
    if parents:
        raise SourceError(
            f"{table} is a partition or an inheritance child of {', '.join(parents)}: writes "
            "through the parent would bypass simindex's triggers; index a plain table"
        )
    if children:
        raise SourceError(
            f"{table} has inheritance children ({', '.join(children)}), whose rows simindex's "
            "triggers would not see; index a table without children"
        )


@dataclass(frozen=True, slots=True)
class _Column:
    type: str
    stored_type: str
    category: str
    not_null: bool
    keyable: bool
    attnum: int
    position: int
    type_id: int
    typmod: int
    text_by_builtin_means: bool


def _comparable(conn: PgConnection, key_type: str) -> bool:
    try:
        with conn.transaction():  # a savepoint: the failed probe leaves the transaction usable
            conn.execute(statement("source_key_comparable", key_type=sql.SQL(key_type)))
            conn.execute(statement("source_key_unprepare"))
    except (psycopg.errors.UndefinedFunction, psycopg.errors.AmbiguousFunction):
        return False
    return True


def _primary_key(conn: PgConnection, oid: object, table: str) -> str:
    row = conn.execute(statement("source_primary_key"), {"oid": oid}).fetchone()
    columns = row[0] if row else None
    if not columns:
        raise SourceError(
            f"table {table!r} has no primary key checked at once (none, or a deferrable one); "
            "name a unique key column"
        )
    if len(columns) != 1:
        raise SourceError(
            f"table {table!r} has a composite primary key {columns}; name a single unique "
            "key column"
        )
    return str(columns[0])


def _unique_columns(conn: PgConnection, oid: object, table: str) -> set[str]:
    return {str(name) for (name,) in conn.execute(statement("source_unique_columns"), {"oid": oid})}


def check_owner(conn: PgConnection, source: Source) -> None:
    """Raise :class:`SourceError` unless the current role may make the index's triggers: they
    are enabled ALWAYS (so that rows a logical replication subscription applies, and writes
    under ``session_replication_role = replica``, are queued too), which only the table's owner
    (or a superuser) may do."""
    row = conn.execute(statement("source_owned"), {"oid": source.oid}).fetchone()
    if row is None or row[0]:
        return
    raise SourceError(
        f"{source.schema}.{source.table} belongs to {row[1]}: an index's triggers are enabled "
        "ALWAYS (replicated writes are indexed too), which only the table's owner may do; run "
        f"this as {row[1]}, a member of it or a superuser"
    )


def row_estimate(conn: PgConnection, source: Source) -> int | None:
    """The planner's row count of the source (cheap; None before the first ANALYZE)."""
    row = conn.execute(statement("source_row_estimate"), {"oid": source.oid}).fetchone()
    return int(row[0]) if row and row[0] else None


def row_count(conn: PgConnection, source: Source) -> int:
    """The source's real row count (a scan: builds read every row anyway), read
    :func:`unfiltered`."""
    with unfiltered(conn, source):
        row = conn.execute(statement("source_count", table=source.identifier)).fetchone()
    return int(row[0]) if row else 0


def _lenient(loader: type[Loader]) -> type[Loader]:
    class Lenient(loader):  # type: ignore[valid-type,misc]  # (a class made from a variable)
        def load(self, data: Buffer) -> Any:
            try:
                return super().load(data)
            except psycopg.DataError:
                return bytes(data).decode()

    return Lenient


_LENIENT = {
    name: _lenient(loader)
    for name, loader in (
        ("date", datetime_types.DateLoader),
        ("time", datetime_types.TimeLoader),
        ("timetz", datetime_types.TimetzLoader),
        ("timestamp", datetime_types.TimestampLoader),
        ("timestamptz", datetime_types.TimestamptzLoader),
    )
}


def lenient_keys(cursor: psycopg.Cursor[Any] | psycopg.ServerCursor[Any]) -> None:
    """Let ``cursor`` return, as their text, the dates and times Python cannot hold
    (``'infinity'``, BC, past the year 9999, ``24:00``) instead of failing the fetch: a check
    of an index whose keys include one still reads every row (:func:`key_texts` sends such a
    mix back)."""
    for name, loader in _LENIENT.items():
        cursor.adapters.register_loader(name, loader)


def key_texts(keys: Sequence[Any]) -> Sequence[Any]:
    """``keys`` as :func:`lenient_keys` gave them, all as text when some are (PostgreSQL's
    input functions read Python's ISO forms of the others)."""
    if any(isinstance(key, str) for key in keys) and not all(isinstance(key, str) for key in keys):
        return [key if isinstance(key, str) else key.isoformat() for key in keys]
    return keys


def refuse_policies(conn: PgConnection, source: Source) -> None:
    """Raise :class:`~simindex.errors.SourceError` when the source's row-level security
    applies to the current role: simindex reads every row of a source, and never through a
    policy (code the table's owner wrote, which would run with the reader's rights). A
    superuser, a BYPASSRLS role and the table's owner (unless it forces RLS on itself) read
    the table without its policies. Call it with the table locked (policies cannot change)."""
    row = conn.execute(statement("source_policies_apply"), {"oid": source.oid}).fetchone()
    if row and row[0]:
        raise SourceError(
            f"{source.schema}.{source.table} has row-level security, which the current role "
            "does not bypass: simindex reads every row of a source, as the table's owner, a "
            "superuser or a BYPASSRLS role (ALTER ROLE ... BYPASSRLS), never through a policy"
        )


@contextmanager
def unfiltered(conn: PgConnection, source: Source) -> Iterator[None]:
    """Within the block, ``conn`` reads with ``row_security = off``, once
    :func:`refuse_policies` found none of the source's policies apply: a statement that would
    still meet one fails, as :class:`~simindex.errors.SourceError` (an index error: sync records
    the index broken rather than take the rows a policy hides for removed). The setting is put
    back afterwards, so a caller's transaction goes on as it was. Only for statements that read
    no table of simindex's (whose own policies must apply)."""
    refuse_policies(conn, source)
    row = conn.execute(statement("source_row_security_off")).fetchone()
    previous = row[0] if row else "on"
    try:
        yield
    except psycopg.errors.InsufficientPrivilege as exc:
        if "row-level security" not in (exc.diag.message_primary or ""):
            raise
        raise SourceError(
            f"{source.schema}.{source.table} has row-level security, which the current role "
            "does not bypass: simindex reads every row of a source, as the table's owner, a "
            "superuser or a BYPASSRLS role (ALTER ROLE ... BYPASSRLS), never through a "
            f"policy ({exc.diag.message_primary})"
        ) from exc
    finally:
        if conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS:
            conn.execute(statement("source_row_security_restore"), {"previous": previous})


def key_from_text(conn: PgConnection, source: Source, text: str) -> Any:
    """``text`` cast by PostgreSQL to the source key's type (a key typed on a command line)."""
    cast = statement("source_cast_key", key_type=sql.SQL(source.key_type))
    try:
        with conn.transaction():  # a savepoint: a bad key leaves the caller's transaction usable
            row = conn.execute(cast, {"key": text}).fetchone()
    except psycopg.DataError as exc:
        raise ValueError(f"bad key {text!r}: {exc.diag.message_primary}") from exc
    assert row is not None
    return row[0]


def check_key(key: object) -> object:
    """``key`` if it can name a row (keys are NOT NULL)."""
    if key is None:
        raise ValueError("key must not be None: give the key of a row of the index's table")
    return key


@contextmanager
def key_errors(source: Source, key: object) -> Iterator[None]:
    """Driver errors that a key of the wrong type or value causes, as TypeError or
    ValueError naming the key type (the transaction is left failed, as by any bad statement)."""
    try:
        yield
    except (psycopg.errors.UndefinedFunction, psycopg.errors.DatatypeMismatch) as exc:
        raise TypeError(
            f"key {key!r} is a {type(key).__name__}, which does not fit the index's key type "
            f"{source.key_type}"
        ) from exc
    except psycopg.DataError as exc:
        raise ValueError(
            f"bad key {key!r} for key type {source.key_type}: {exc.diag.message_primary}"
        ) from exc
    except psycopg.ProgrammingError as exc:
        if exc.sqlstate is not None:
            raise
        raise TypeError(
            f"key {key!r} is a {type(key).__name__}, which cannot be sent to PostgreSQL"
        ) from exc
