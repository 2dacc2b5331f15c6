"""Alembic operations for an app's own migrations: ``op.create_simindex`` and ``op.drop_simindex``.

Importing this module registers them (once), so the app's ``env.py`` says::

    import simindex.alembic  # noqa: F401  (adds op.create_simindex and op.drop_simindex)

and a migration::

    def upgrade() -> None:
        op.create_simindex("docs_body", "documents", "body", method="simhash", max_distance=3)

    def downgrade() -> None:
        op.drop_simindex("docs_body", "documents", "body", method="simhash", max_distance=3)

mypy cannot see operations added at run time; ``op.invoke(CreateSimindexOp(...))`` is the same
call, typed. simindex's own schema must be migrated first (``simindex.migrate`` or ``simindex
migrate``); it keeps its own version table, so the app's Alembic history stays the app's.

The operation creates the index empty, with the triggers that keep it in step from then on: it
never reads the table (a migration must not run for hours). Fill it afterwards with
``simindex.get_index(engine, name).build()``.

Every statement goes through ``operations.execute``, so ``alembic upgrade --sql`` writes them
into the script. Offline there is no database to look the table up in, so ``create_simindex``
then needs ``key=`` and ``key_type=``; the script checks them against the table when it runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields
from typing import Any, TypedDict, Unpack, cast

import psycopg
from alembic.operations import MigrateOperation, Operations
from psycopg import sql
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ClauseElement, Executable

from simindex.core.minhash import Scheme, SchemeName
from simindex.core.spec import IndexSpec, Method, MinHash, SimHash, resolve
from simindex.core.text import Shingling
from simindex.db.catalog import DEFAULT_SCHEMA, check_name, check_schema
from simindex.db.connection import PgConnection, pinned
from simindex.db.objects import create_statements, drop_statements
from simindex.db.source import Source
from simindex.db.statements import statement
from simindex.errors import SimindexError
from simindex.ops import create as create_op

__all__ = ["CreateSimindexOp", "DropSimindexOp", "MethodOptions"]

# A type as format_type prints it, or as a user spells one: words, a schema, quotes, a modifier.
_KEY_TYPE = re.compile(r'[A-Za-z_"][\w ."]*(\(\d+(, ?\d+)?\))?')


class MethodOptions(TypedDict, total=False):
    """Options of ``method="simhash"`` (:class:`~simindex.SimHash`: ``max_distance``,
    ``num_blocks``, ``top_n``, ``expected_rows``, ``idf``, ``ignore_common``, ``shingling``)
    or of ``method="minhash"`` (:class:`~simindex.MinHash`: ``threshold``, ``num_perm``,
    ``scheme``, ``seed``, ``num_bands``, ``rows_per_band``, ``ignore_common``,
    ``shingling``)."""

    max_distance: int
    num_blocks: int
    top_n: int
    expected_rows: int
    threshold: float
    num_perm: int
    scheme: Scheme | SchemeName
    seed: int
    num_bands: int
    rows_per_band: int
    idf: bool
    ignore_common: float
    shingling: Shingling


def method_from(method: str | Method, options: MethodOptions) -> Method:
    """A :class:`SimHash` or :class:`MinHash` from the operation's arguments."""
    if isinstance(method, SimHash | MinHash):
        if options:
            raise TypeError(
                f"give options inside method={type(method).__name__}(...) or as keywords beside "
                f"method='simhash' or 'minhash', not both (got {sorted(options)})"
            )
        return method
    kinds: dict[str, type[SimHash] | type[MinHash]] = {"simhash": SimHash, "minhash": MinHash}
    if not isinstance(method, str) or method not in kinds:
        raise ValueError(
            f"method must be 'simhash', 'minhash', SimHash(...) or MinHash(...), got {method!r}"
        )
    kind = kinds[method]
    allowed = {field.name for field in fields(kind)}
    wrong = sorted(set(options) - allowed)
    if wrong:
        raise TypeError(
            f"{', '.join(wrong)} {'is not an option' if len(wrong) == 1 else 'are not options'} "
            f"of method={method!r}; its options are {', '.join(sorted(allowed))}"
        )
    return kind(**cast(dict[str, Any], options))  # the names were checked just above


class _SimindexOp(MigrateOperation):
    """What both operations know: the index, its source and its method."""

    def __init__(
        self,
        name: str,
        table: str | None,
        column: str | None,
        method: str | Method | None,
        options: MethodOptions,
        key: str | None,
        key_type: str | None,
        schema: str | None,
        index_schema: str,
    ) -> None:
        self.name = check_name(name)
        for label, value in (
            ("table", table),
            ("column", column),
            ("key", key),
            ("key_type", key_type),
            ("schema", schema),
        ):
            if value is not None and (not isinstance(value, str) or not value):
                raise TypeError(f"{label} must be a non-empty str, got {value!r}")
        if key_type is not None and not _KEY_TYPE.fullmatch(key_type):
            raise ValueError(f"key_type must name a SQL type such as 'bigint', got {key_type!r}")
        self.table = table
        self.column = column
        self.method = None if method is None else method_from(method, options)
        if method is None and options:
            raise TypeError(f"options {sorted(options)} need method='simhash' or 'minhash'")
        self.spec: IndexSpec | None = None if self.method is None else resolve(self.method)
        self.key = key
        self.key_type = key_type
        self.schema = schema
        self.index_schema = check_schema(index_schema)

    def _arguments(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "table": self.table,
            "column": self.column,
            "method": self.method,
            "key": self.key,
            "key_type": self.key_type,
            "schema": self.schema,
            "index_schema": self.index_schema,
        }

    def __repr__(self) -> str:
        arguments = ", ".join(f"{k}={v!r}" for k, v in self._arguments().items() if v is not None)
        return f"{type(self).__name__}({arguments})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, _SimindexOp)
        return self._arguments() == other._arguments()


@Operations.register_operation("create_simindex")
class CreateSimindexOp(_SimindexOp):
    """Create an empty simindex index on ``table.column``, with the triggers that keep it in
    step (fill it afterwards with ``simindex build`` or :meth:`simindex.Index.build`).

    Parameters:
        name: the index's name (lowercase letters, digits, underscores).
        table: the source table; ``schema`` qualifies it (default: the search_path).
        column: the source table's text column.
        method: ``"simhash"`` (default) or ``"minhash"`` with their options as keywords
            (:class:`MethodOptions`), or a ``SimHash(...)``/``MinHash(...)``.
        key: a unique column identifying rows (default: the single-column primary key).
        key_type: the key's SQL type (``"bigint"``); found online, needed offline (``--sql``).
        index_schema: the schema simindex was migrated into.
    """

    def __init__(
        self,
        name: str,
        table: str,
        column: str,
        *,
        method: str | Method = "simhash",
        key: str | None = None,
        key_type: str | None = None,
        schema: str | None = None,
        index_schema: str = DEFAULT_SCHEMA,
        **options: Unpack[MethodOptions],
    ) -> None:
        if table is None or column is None:
            raise TypeError("create_simindex needs a table and a text column")
        if method is None:
            raise TypeError("create_simindex needs a method: 'simhash', 'minhash' or one spelt out")
        super().__init__(name, table, column, method, options, key, key_type, schema, index_schema)

    @classmethod
    def create_simindex(
        cls,
        operations: Operations,
        name: str,
        table: str,
        column: str,
        *,
        method: str | Method = "simhash",
        key: str | None = None,
        key_type: str | None = None,
        schema: str | None = None,
        index_schema: str = DEFAULT_SCHEMA,
        **options: Unpack[MethodOptions],
    ) -> None:
        """Create an empty simindex index on ``table.column`` (see :class:`CreateSimindexOp`)."""
        operation = cls(
            name,
            table,
            column,
            method=method,
            key=key,
            key_type=key_type,
            schema=schema,
            index_schema=index_schema,
            **options,
        )
        operations.invoke(operation)

    def reverse(self) -> DropSimindexOp:
        return DropSimindexOp(**self._arguments())

    def statements(self, operations: Operations) -> list[sql.Composed]:
        """What the operation runs (online, after checking the source and the catalog)."""
        assert self.table is not None and self.column is not None and self.spec is not None
        conn = _connection(operations)
        if conn is None:
            if self.key is None or self.key_type is None:
                raise ValueError(
                    "offline (alembic --sql) there is no database to read the table from: "
                    "create_simindex needs key= and key_type= (the key column and its SQL "
                    "type, as in key='id', key_type='bigint')"
                )
            source = Source(0, self.schema or "", self.table, self.key, self.key_type, self.column)
            check = statement(
                "source_check",
                table=sql.Literal(source.identifier.as_string()),
                column=sql.Literal(self.column),
                key=sql.Literal(self.key),
                key_type=sql.Literal(self.key_type),
            )
            return [check, *create_statements(self.index_schema, self.name, source, self.spec)]
        _check_catalog(conn, self.index_schema)
        return create_op.create_statements(
            conn,
            self.index_schema,
            self.name,
            self.table,
            self.column,
            self.spec.method,
            key=self.key,
            schema=self.schema,
            key_type=self.key_type,
            size_to_table=False,
        )


@Operations.register_operation("drop_simindex")
class DropSimindexOp(_SimindexOp):
    """Drop a simindex index: its side tables, functions, queue, triggers and catalog row (the
    source table is untouched).

    Online, the name is enough: the catalog tells the rest. Offline (``--sql``) it needs the
    ``table`` and ``method`` it was created with; the arguments of ``create_simindex`` all fit.
    """

    def __init__(
        self,
        name: str,
        table: str | None = None,
        column: str | None = None,
        *,
        method: str | Method | None = None,
        key: str | None = None,
        key_type: str | None = None,
        schema: str | None = None,
        index_schema: str = DEFAULT_SCHEMA,
        **options: Unpack[MethodOptions],
    ) -> None:
        super().__init__(name, table, column, method, options, key, key_type, schema, index_schema)

    @classmethod
    def drop_simindex(
        cls,
        operations: Operations,
        name: str,
        table: str | None = None,
        column: str | None = None,
        *,
        method: str | Method | None = None,
        key: str | None = None,
        key_type: str | None = None,
        schema: str | None = None,
        index_schema: str = DEFAULT_SCHEMA,
        **options: Unpack[MethodOptions],
    ) -> None:
        """Drop a simindex index (see :class:`DropSimindexOp`)."""
        operation = cls(
            name,
            table,
            column,
            method=method,
            key=key,
            key_type=key_type,
            schema=schema,
            index_schema=index_schema,
            **options,
        )
        operations.invoke(operation)

    def reverse(self) -> CreateSimindexOp:
        arguments = self._arguments()
        missing = [label for label in ("table", "column", "method") if arguments[label] is None]
        if missing:
            raise ValueError(
                f"drop_simindex({self.name!r}) cannot be reversed without {', '.join(missing)}"
            )
        return CreateSimindexOp(**arguments)

    def statements(self, operations: Operations) -> list[sql.Composed]:
        """What the operation runs: from the catalog online, from the arguments offline."""
        conn = _connection(operations)
        if conn is None:
            if self.table is None or self.spec is None:
                raise ValueError(
                    "offline (alembic --sql) drop_simindex needs table= and method= (the "
                    "arguments create_simindex had) to name the index's objects"
                )
            source = Source(
                0,
                self.schema or "",
                self.table,
                self.key or "",
                self.key_type or "",
                self.column or "",
            )
            return drop_statements(self.index_schema, self.name, source, self.spec)
        _check_catalog(conn, self.index_schema)
        return create_op.drop_statements(conn, self.index_schema, self.name)


class _Verbatim(Executable, ClauseElement):
    """A rendered statement that reaches the server, or the ``--sql`` script, exactly as it is.

    A string (``text()``) would not: offline, SQLAlchemy doubles each ``%`` for the driver's
    paramstyle and the script keeps them doubled, which breaks plpgsql's ``RAISE ... '%'``.
    Online the statement runs with ``no_parameters``, so psycopg does not read ``%`` either.
    """

    inherit_cache = False

    def __init__(self, text: str) -> None:
        self.text = text


@compiles(_Verbatim)
def _compile_verbatim(element: _Verbatim, compiler: SQLCompiler, **kw: Any) -> str:
    return element.text


def _connection(operations: Operations) -> PgConnection | None:
    """The psycopg connection of the migration, or None offline."""
    if operations.get_context().as_sql:
        return None
    raw = operations.get_bind().connection.driver_connection
    if not isinstance(raw, psycopg.Connection):
        raise TypeError(
            "simindex's Alembic operations need the psycopg (version 3) driver online "
            f"(postgresql+psycopg://), got {type(raw).__name__}"
        )
    return raw


def _check_catalog(conn: PgConnection, index_schema: str) -> None:
    regclass = sql.Identifier(index_schema, "indexes").as_string(conn)
    found = conn.execute(statement("session_catalog_exists"), {"catalog": regclass}).fetchone()
    if not (found and found[0]):
        raise SimindexError(
            f"simindex's schema {index_schema!r} is not migrated in this database: run "
            "simindex.migrate(...) (or `simindex migrate`) before this migration"
        )


def _execute(operations: Operations, statements: list[sql.Composed]) -> None:
    context = _connection(operations)
    for composed in statements:
        operations.execute(
            _Verbatim(composed.as_string(context)), execution_options={"no_parameters": True}
        )


@contextmanager
def _pinned(operations: Operations) -> Iterator[None]:
    """The migration's connection with simindex's search_path while the operation runs (the
    app's migration gets its own back for its next statement); nothing offline."""
    conn = _connection(operations)
    if conn is None:
        yield
        return
    with pinned(conn):
        yield


@Operations.implementation_for(CreateSimindexOp)
def _create_simindex(operations: Operations, operation: CreateSimindexOp) -> None:
    with _pinned(operations):
        _execute(operations, operation.statements(operations))


@Operations.implementation_for(DropSimindexOp)
def _drop_simindex(operations: Operations, operation: DropSimindexOp) -> None:
    with _pinned(operations):
        _execute(operations, operation.statements(operations))
