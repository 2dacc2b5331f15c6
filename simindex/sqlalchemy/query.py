"""An index's neighbours as SQLAlchemy selectables that join the app's own models.

Each function returns the table-valued call of one index's own SQL function
(``<index_schema>.<name>_near_v1`` and its siblings: :mod:`simindex.db.simhash_store`,
:mod:`simindex.db.minhash_store`), with a ``key`` column typed like the source table's key and a
``distance`` (SimHash) or ``similarity`` (MinHash) column::

    near = near_key(session, "docs_body", 42)
    stmt = select(Document, near.c.distance).join(near, Document.id == near.c.key)

The function is named by its quoted identifiers and every argument is a bound parameter, so
the selectable composes like a table (WHERE, ORDER BY, LIMIT, subqueries, LATERAL) and its
statements cache. Rows come unordered: order by ``distance`` or ``similarity``. ``limit=n``
keeps the function's nearest ``n`` rows (passed as its ``max_rows`` argument), so a query
inside a cluster of thousands of copies does not return them all.

A query by text fingerprints the text here, with the index's spec from the catalog, so it
needs a bind. A query by key needs only the index's name: with a bind it first checks the
index (it exists, is built, has this method, allows ``max_distance``) and types ``key`` from
the catalog; with ``bind=None`` it costs no round trip, and the database checks when the
statement runs.
"""

from __future__ import annotations

import re
import weakref
from typing import Any

from sqlalchemy import BigInteger, Double, Integer, String, cast, column, literal, null
from sqlalchemy.dialects.postgresql import ARRAY, BIT
from sqlalchemy.dialects.postgresql.base import PGDialect
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import QueryableAttribute, Session
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.functions import Function
from sqlalchemy.sql.selectable import TableValuedAlias
from sqlalchemy.sql.sqltypes import NullType
from sqlalchemy.sql.visitors import InternalTraversal
from sqlalchemy.types import TypeEngine, UserDefinedType

from simindex._session import reading
from simindex.core import validators
from simindex.core.bits import check_fingerprint, to_signed
from simindex.db.catalog import DEFAULT_SCHEMA, IndexInfo, check_name, check_schema
from simindex.db.connection import engine_for
from simindex.db.entry import KeptEntry
from simindex.db.minhash_store import MinHashStore
from simindex.db.simhash_store import SimHashStore

QueryBind = Engine | Connection | Session | str
"""Where the catalog is read: an Engine, a Connection, an ORM Session or a DSN."""

KeyType = TypeEngine[Any] | type[TypeEngine[Any]] | ColumnElement[Any] | QueryableAttribute[Any]
"""The ``key`` column's type, or a column (or mapped attribute) whose type it takes."""

_TYPE_ARGUMENTS = re.compile(r"\(.*?\)")


class _NamedType(UserDefinedType[Any]):
    """A SQL type by the name the catalog keeps (schema-qualified, typmod-exact): a key value
    is cast to it, so it matches the index's function whatever SQLAlchemy calls the type."""

    cache_ok = True

    def __init__(self, name: str) -> None:
        self.name = name

    def get_col_spec(self, **kw: Any) -> str:
        return self.name


class _IndexFunction(Function[Any]):
    """A call of one index's SQL function; its name and schema are always quoted."""

    inherit_cache = True  # the name and schema are part of Function's cache key


@compiles(_IndexFunction)
def _compile_index_function(element: _IndexFunction, compiler: SQLCompiler, **kw: Any) -> str:
    # Function's own rendering leaves a schema unquoted unless it holds odd characters, which
    # would fold "MySchema" to lower case: quote both parts, always.
    quote = compiler.preparer.quote_identifier
    (schema,) = element.packagenames
    return f"{quote(schema)}.{quote(element.name)}{compiler.function_argspec(element, **kw)}"


class _Named(ColumnElement[Any]):
    """``name => value``: a function argument in named notation (PostgreSQL)."""

    inherit_cache = True

    def __init__(self, name: str, value: ColumnElement[Any]) -> None:
        self.name = name
        self.value = value
        self.type = value.type

    # SQLAlchemy declares it on the base class as a plain annotation.
    _traverse_internals = [  # noqa: RUF012
        ("name", InternalTraversal.dp_string),
        ("value", InternalTraversal.dp_clauseelement),
    ]


@compiles(_Named)
def _compile_named(element: _Named, compiler: SQLCompiler, **kw: Any) -> str:
    name = compiler.preparer.quote_identifier(element.name)
    return f"{name} => {compiler.process(element.value, **kw)}"


def _max_rows(limit: int | None) -> list[ColumnElement[Any]]:
    """The ``max_rows`` argument of an index's function: NULL (every row) when no limit is
    given, since the function's own default is a bound for SQL callers."""
    if limit is None:
        return [_Named("max_rows", cast(null(), Integer()))]
    return [_Named("max_rows", literal(validators.limit(limit), Integer()))]


def near(
    bind: QueryBind,
    name: str,
    text: str | None = None,
    *,
    fingerprint: int | None = None,
    max_distance: int | None = None,
    key_type: KeyType | None = None,
    index_schema: str = DEFAULT_SCHEMA,
    limit: int | None = None,
) -> TableValuedAlias:
    """Rows whose SimHash is within ``max_distance`` bits of a text's (or of a fingerprint's):
    columns ``key`` and ``distance``.

    Parameters:
        bind: where the index's spec is read, to fingerprint the text.
        name: the index.
        text: a text (give exactly one of ``text`` and ``fingerprint``); a text without
            features (empty, only punctuation) finds no rows.
        fingerprint: a SimHash fingerprint, instead of ``text``: the signed ``bigint`` the SQL
            functions take, as :meth:`simindex.Index.fingerprint` gives it (see
            :mod:`simindex.fingerprint`).
        max_distance: defaults to, and may not exceed, the index's.
        key_type: the ``key`` column's SQLAlchemy type, or a column or mapped attribute whose
            type it takes (default: the type of the source key, from the catalog).
        index_schema: the schema simindex was migrated into.
        limit: at most this many rows, the nearest (needs the index's functions from a
            create or build by this release).
    """
    if (text is None) == (fingerprint is None):
        raise TypeError("give exactly one of text= or fingerprint=")
    if text is not None and not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if fingerprint is not None:
        check_fingerprint(fingerprint)
    info, store = _ready(_required(bind, "near"), name, index_schema)
    if not isinstance(store, SimHashStore):
        raise TypeError(f"index {name!r} is a MinHash index: use similar()")
    distance = validators.distance(max_distance, store.design.max_distance)
    stored: int | None = None  # NULL: a text without features has no neighbours
    if fingerprint is not None:
        stored = fingerprint
    else:
        values, present = info.spec.simhash_values([text])
        if present[0]:
            stored = to_signed(int(values[0]))
    return _call(
        _function(index_schema, name, "near"),
        [literal(stored, BigInteger()), literal(distance, Integer()), *_max_rows(limit)],
        _key_type(key_type, info),
        column("distance", Integer()),
    )


def near_key(
    bind: QueryBind | None,
    name: str,
    key: Any,
    *,
    max_distance: int | None = None,
    key_type: KeyType | None = None,
    index_schema: str = DEFAULT_SCHEMA,
    limit: int | None = None,
) -> TableValuedAlias:
    """Rows within ``max_distance`` bits of the row with ``key`` (itself excluded): columns
    ``key`` and ``distance``. A key not in the index finds no rows.

    Parameters:
        bind: where the index is checked and its key type read; None builds the selectable
            without a round trip.
        name: the index.
        key: a key value, or a SQL expression such as a column (for a LATERAL join).
        max_distance: defaults to, and may not exceed, the index's.
        key_type: the ``key`` column's SQLAlchemy type, or a column or mapped attribute whose
            type it takes (default: the source key's type from the catalog; without a bind,
            the type of ``key``).
        index_schema: the schema simindex was migrated into.
        limit: at most this many rows, the nearest (needs the index's functions from a
            create or build by this release).
    """
    check_name(name)
    check_schema(index_schema)
    largest: int | None = None
    info: IndexInfo | None = None
    if bind is not None:
        info, store = _ready(bind, name, index_schema)
        if not isinstance(store, SimHashStore):
            raise TypeError(f"index {name!r} is a MinHash index: use similar_key()")
        largest = store.design.max_distance
    distance = validators.distance(max_distance, largest)
    return _by_key(
        _function(index_schema, name, "near_key"),
        key,
        key_type,
        info,
        None if distance is None else literal(distance, Integer()),
        column("distance", Integer()),
        limit,
    )


def similar(
    bind: QueryBind,
    name: str,
    text: str,
    *,
    threshold: float | None = None,
    key_type: KeyType | None = None,
    index_schema: str = DEFAULT_SCHEMA,
    limit: int | None = None,
) -> TableValuedAlias:
    """Rows whose estimated Jaccard similarity to a text reaches ``threshold``: columns ``key``
    and ``similarity``.

    Candidates share an LSH band with the text and are verified with the stored signatures,
    as :meth:`simindex.Index.similar` with ``verify="estimate"`` (SQL reads no source text).

    Parameters:
        bind: where the index's spec is read, to compute the text's signature.
        name: the index.
        text: the query; a text without features finds no rows.
        threshold: from 0 to 1 (default: the index's).
        key_type: the ``key`` column's SQLAlchemy type, or a column or mapped attribute whose
            type it takes (default: the type of the source key, from the catalog).
        index_schema: the schema simindex was migrated into.
        limit: at most this many rows, the nearest (needs the index's functions from a
            create or build by this release).
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    info, store = _ready(_required(bind, "similar"), name, index_schema)
    if not isinstance(store, MinHashStore):
        raise TypeError(f"index {name!r} is a SimHash index: use near()")
    floor = validators.threshold(threshold, store.threshold)
    sketch: str | None = None  # NULLs: a text without features has no neighbours
    band_keys: list[int] | None = None
    set_hash: int | None = None
    values, lengths = info.spec.minhash_values([text])
    if lengths[0]:
        sketch, band_keys, set_hash = store.query_arguments(values[0])
    arguments: list[ColumnElement[Any]] = [
        cast(literal(sketch, String()), BIT(varying=True)),
        literal(band_keys, ARRAY(Integer())),
        literal(floor, Double()),
    ]
    return _call(
        _function(index_schema, name, "similar"),
        [*arguments, *_max_rows(limit), _Named("set_hash", literal(set_hash, BigInteger()))],
        _key_type(key_type, info),
        column("similarity", Double()),
    )


def similar_key(
    bind: QueryBind | None,
    name: str,
    key: Any,
    *,
    threshold: float | None = None,
    key_type: KeyType | None = None,
    index_schema: str = DEFAULT_SCHEMA,
    limit: int | None = None,
) -> TableValuedAlias:
    """Rows whose estimated Jaccard similarity to the row with ``key`` reaches ``threshold``
    (itself excluded): columns ``key`` and ``similarity``. A key not in the index finds no rows.

    Parameters:
        bind: where the index is checked and its key type read; None builds the selectable
            without a round trip.
        name: the index.
        key: a key value, or a SQL expression such as a column (for a LATERAL join).
        threshold: from 0 to 1 (default: the index's).
        key_type: the ``key`` column's SQLAlchemy type, or a column or mapped attribute whose
            type it takes (default: the source key's type from the catalog; without a bind,
            the type of ``key``).
        index_schema: the schema simindex was migrated into.
        limit: at most this many rows, the nearest (needs the index's functions from a
            create or build by this release).
    """
    check_name(name)
    check_schema(index_schema)
    default: float | None = None
    info: IndexInfo | None = None
    if bind is not None:
        info, store = _ready(bind, name, index_schema)
        if not isinstance(store, MinHashStore):
            raise TypeError(f"index {name!r} is a SimHash index: use near_key()")
        default = store.threshold
    floor = validators.threshold(threshold, default)
    return _by_key(
        _function(index_schema, name, "similar_key"),
        key,
        key_type,
        info,
        None if floor is None else literal(floor, Double()),
        column("similarity", Double()),
        limit,
    )


def _function(index_schema: str, name: str, kind: str) -> tuple[str, str]:
    """Schema and name of an index's SQL function (as the stores name them)."""
    return index_schema, f"{name}_{kind}_v1"


def _required(bind: QueryBind | None, verb: str) -> QueryBind:
    if bind is None:
        raise TypeError(f"{verb}() by text needs a bind: the index's spec fingerprints the text")
    return bind


_kept: weakref.WeakKeyDictionary[Engine, dict[tuple[str, str], KeptEntry]] = (
    weakref.WeakKeyDictionary()
)


def _ready(
    bind: QueryBind, name: str, index_schema: str
) -> tuple[IndexInfo, SimHashStore | MinHashStore]:
    """The catalog's word on the index; IndexNotFoundError or IndexNotReadyError otherwise.
    Its entry is kept per Engine and index, and checked by one statement (as an Index
    checks its own: :mod:`simindex.db.entry`), sent on the connection as the caller left it."""
    if isinstance(bind, Session):
        bind = bind.connection()  # the session's own transaction
    check_name(name)
    check_schema(index_schema)
    engine = engine_for(bind) if isinstance(bind, str) else bind
    if isinstance(engine, Connection):
        engine = engine.engine
    kept = _kept.setdefault(engine, {}).setdefault(
        (index_schema, name), KeptEntry(index_schema, name)
    )
    with reading(bind, index_schema, pin=False) as conn:
        entry = kept.ready(conn)
    return entry.info, entry.store


def _by_key(
    function: tuple[str, str],
    key: Any,
    key_type: KeyType | None,
    info: IndexInfo | None,
    bound: ColumnElement[Any] | None,
    measure: ColumnElement[Any],
    limit: int | None,
) -> TableValuedAlias:
    result_type = _key_type(key_type, info)
    clause = getattr(key, "__clause_element__", None)
    argument = clause() if clause is not None else key
    if not isinstance(argument, ColumnElement):
        argument = literal(key, None if isinstance(result_type, NullType) else result_type)
        if info is not None and isinstance(result_type, NullType):
            argument = cast(argument, _NamedType(info.source.key_type))
    if isinstance(result_type, NullType):
        result_type = argument.type
    if isinstance(result_type, NullType):
        raise TypeError(f"cannot tell the type of key {key!r}: give key_type= or a bind")
    arguments = [argument] if bound is None else [argument, bound]
    return _call(function, arguments + _max_rows(limit), result_type, measure)


def _call(
    function: tuple[str, str],
    arguments: list[ColumnElement[Any]],
    key_type: TypeEngine[Any],
    measure: ColumnElement[Any],
) -> TableValuedAlias:
    schema, name = function
    call = _IndexFunction(name, *arguments, packagenames=(schema,))
    return call.table_valued(column("key", key_type), measure)


def _key_type(key_type: KeyType | None, info: IndexInfo | None) -> TypeEngine[Any]:
    """The given type, else the catalog's key type (NullType when neither says)."""
    if key_type is None:
        return NullType() if info is None else _catalog_type(info.source.key_type)
    if isinstance(key_type, TypeEngine):
        return key_type
    if isinstance(key_type, type) and issubclass(key_type, TypeEngine):
        return key_type()
    clause = getattr(key_type, "__clause_element__", None)
    expression = clause() if clause is not None else key_type
    if isinstance(expression, ColumnElement):
        return expression.type
    raise TypeError(
        "key_type must be a SQLAlchemy type, a column or a mapped attribute, "
        f"got {type(key_type).__name__}"
    )


def _catalog_type(type_name: str) -> TypeEngine[Any]:
    """The type PostgreSQL's dialect reflects for a format_type() name (NullType if unknown,
    as for a domain: the driver's own conversion then applies)."""
    found = PGDialect.ischema_names.get(_TYPE_ARGUMENTS.sub("", type_name))
    return NullType() if found is None else found()
