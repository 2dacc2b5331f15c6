"""The catalog: one row per index, in simindex's own schema, and how it is read.

:mod:`simindex.db.catalog_table` is the schema the code expects (migrations create it, and a
test compares the two). An operation gets an index from here as an :class:`IndexInfo` (the row)
and its store.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import psycopg
from psycopg import sql

from simindex.core.spec import IndexSpec, SimHash
from simindex.db.connection import PgConnection
from simindex.db.minhash_store import MinHashStore
from simindex.db.simhash_store import SimHashStore
from simindex.db.source import Source
from simindex.db.statements import statement
from simindex.errors import (
    IndexNotFoundError,
    IndexNotReadyError,
    SchemaNotMigratedError,
    SourceChangedError,
)

DEFAULT_SCHEMA = "simindex"
METHODS = ("simhash", "minhash")
LIVE_STATES = ("created", "building", "ready", "failed")
"""States in which the triggers queue changes."""
DRIFT_STATES = ("needs_rebuild", "source_dropped")
"""States an index enters when its source changed in a way it cannot follow."""
STATES = LIVE_STATES + DRIFT_STATES
CLUSTERINGS = ("pairs", "bottom_k", "leader")
NAME_MAX_LENGTH = 63
# PostgreSQL truncates identifiers to 63 bytes (NAMEDATALEN - 1).
_IDENTIFIER_MAX_BYTES = 63
_INDEX_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")

Store = SimHashStore | MinHashStore


@dataclass(frozen=True, slots=True)
class IndexInfo:
    """What the catalog says about an index."""

    name: str
    source: Source
    spec: IndexSpec
    state: str
    row_count: int
    skipped_count: int
    created_at: datetime
    updated_at: datetime
    built_at: datetime | None
    index_schema: str
    """The simindex schema holding this catalog row and the index's side tables."""
    broken: bool = False
    """Whether the sync worker's last batch of this index failed as a whole."""
    last_error: str | None = None
    """The last error the sync worker met on this index (kept after it recovers)."""
    last_error_at: datetime | None = None
    state_reason: str | None = None
    """Why the index is ``needs_rebuild`` or ``source_dropped``."""
    clustering: str | None = None
    """How its clusters were last made (``leader`` ones are kept up to date by sync)."""


def check_name(name: str) -> str:
    """Index names become part of table and function names: keep them plain."""
    if not isinstance(name, str) or not _INDEX_NAME.fullmatch(name):
        raise ValueError(
            "an index name is 1 to 40 characters: a lowercase letter, then lowercase letters, "
            f"digits or underscores; got {name!r}"
        )
    return name


def check_schema(schema: str) -> str:
    """``schema`` if it can name simindex's schema; ValueError or TypeError otherwise.

    Any characters are allowed, since the name is always quoted; PostgreSQL's limits are not.
    """
    if not isinstance(schema, str):
        raise TypeError(f"schema must be a str, got {type(schema).__name__}")
    size = len(schema.encode())
    if not schema or size > _IDENTIFIER_MAX_BYTES or "\0" in schema:
        raise ValueError(
            f"schema must be a name of 1 to {_IDENTIFIER_MAX_BYTES} bytes without NUL "
            f"characters, got {schema!r} ({size} bytes)"
        )
    return schema


def catalog(schema: str) -> sql.Identifier:
    """The catalog table of simindex's schema ``schema``."""
    return sql.Identifier(check_schema(schema), "indexes")


def side_statement(schema: str, name: str, store: Store) -> sql.Composed:
    """Records ``store``'s live table as the one index ``name``'s query functions read, in the
    transaction that made it (create, a build's swap): their swap guard compares it, as their
    snapshot sees it, with the table they locked."""
    return statement(
        "catalog_set_side",
        catalog=catalog(schema),
        name=sql.Literal(name),
        table=sql.Literal(store.table().as_string()),
    )


Health = Literal["broken", "row_error", "recovered", "resolved"]


def record_health(
    conn: PgConnection,
    schema: str,
    name: str,
    health: Health,
    error: str | None = None,
    *,
    failed: sql.Identifier | None = None,
) -> None:
    """Record index ``name`` broken (``error`` says why), its latest failed row's ``error``,
    recovered, or resolved (its last error forgotten, when its ``failed`` items table is
    empty), through ``record_health_v1`` (the worker right may call it; a catalog row a build
    or drop holds is left alone)."""
    function = sql.Identifier(schema, "record_health_v1")
    if health == "resolved":
        if failed is None:
            raise ValueError("resolved needs the index's failed items table")
        conn.execute(
            statement("catalog_record_resolved", function=function, failed=failed),
            {"name": name},
        )
        return
    conn.execute(
        statement("catalog_record_health", function=function),
        {"name": name, "health": health, "error": error},
    )


def store_for(schema: str, name: str, source: Source, spec: IndexSpec) -> Store:
    """The side tables of an index, as its method keeps them."""
    if isinstance(spec.method, SimHash):
        return SimHashStore(schema, name, source.key_type, spec.design)  # type: ignore[arg-type]
    return MinHashStore(
        schema,
        name,
        source.key_type,
        spec.design,  # type: ignore[arg-type]
        spec.method.num_perm,
        spec.method.threshold,
        spec.method.sketch_bits,
    )


def store_of(info: IndexInfo) -> Store:
    """The side tables of the index ``info`` describes."""
    return store_for(info.index_schema, info.name, info.source, info.spec)


def find_index(
    conn: PgConnection, schema: str, name: str, *, share_lock: bool = False
) -> IndexInfo | None:
    """The catalog row of index ``name`` with its source as it is now (current names; the
    state its source's drift implies), or None.

    ``share_lock``: hold the row ``FOR KEY SHARE`` for this transaction, so that no build or
    drop starts meanwhile; None, as for a missing index, while one holds it.
    """
    check_name(name)
    with _catalog_errors(schema):
        if share_lock:
            # Through the owner's function: no other role may lock catalog rows. A statement
            # of its own, before the read, so the read sees the row as it is once held.
            held = conn.execute(
                statement("catalog_share", function=sql.Identifier(schema, "share_index_v1")),
                {"name": name},
            ).fetchone()
            if not (held and held[0]):
                return None
        row = conn.execute(_catalog_get(schema), {"name": name}).fetchone()
    return None if row is None else _index_info(schema, row)


def _catalog_get(schema: str) -> sql.Composed:
    return statement(
        "catalog_get", catalog=catalog(schema), drift=sql.Identifier(schema, "drift_v1")
    )


def _index_info(schema: str, row: Any) -> IndexInfo:
    """The IndexInfo of a row of ``catalog_get``."""
    (index_name, source_schema, table, key_column, key_type, text_column, spec) = row[:7]
    state, row_count, skipped_count, created_at, updated_at, built_at, reason = row[7:14]
    oid, key_attnum, text_attnum, key_position, text_position, clustering = row[14:20]
    broken, last_error, last_error_at = row[20:]
    source = Source(
        oid,
        source_schema,
        table,
        key_column,
        key_type,
        text_column,
        key_attnum=key_attnum,
        text_attnum=text_attnum,
        key_position=key_position,
        text_position=text_position,
    )
    return IndexInfo(
        index_name,
        source,
        IndexSpec.from_json(spec),
        state,
        row_count,
        skipped_count,
        created_at,
        updated_at,
        built_at,
        schema,
        broken=broken,
        last_error=last_error,
        last_error_at=last_error_at,
        state_reason=reason,
        clustering=clustering,
    )


def read_index(conn: PgConnection, schema: str, name: str) -> IndexInfo:
    """The catalog row of index ``name``; IndexNotFoundError if there is none."""
    info = find_index(conn, schema, name)
    if info is None:
        raise IndexNotFoundError(f"no index named {name!r}")
    return info


def ready_index(conn: PgConnection, schema: str, name: str) -> tuple[IndexInfo, Store]:
    """The catalog row and store of an index that can answer queries (built, its source as
    the catalog recorded it)."""
    info = read_index(conn, schema, name)
    if info.state != "ready":
        raise IndexNotReadyError(not_ready_message(info))
    return info, store_of(info)


def not_ready_message(info: IndexInfo) -> str:
    """Why ``info``'s index cannot answer, and what to do about it, in one line."""
    name = info.name
    if info.state == "source_dropped":
        return (
            f"index {name!r} cannot answer: {info.state_reason or 'its table was dropped'}; "
            f"drop it (`simindex drop {name}`)"
        )
    if info.state == "needs_rebuild":
        return (
            f"index {name!r} needs a rebuild: {info.state_reason}; run build() (or "
            f"`simindex build {name}`)"
        )
    return f"index {name!r} is {info.state}: run build() (or `simindex build {name}`) first"


def lock_source(
    conn: PgConnection, info: IndexInfo, pipeline: psycopg.Pipeline | None = None
) -> Source:
    """Lock ``info``'s source table against schema changes for this transaction (ACCESS
    SHARE, the lock any read takes) and return it as it is now, after checking it is still the
    table, columns and types the catalog recorded.

    Between finding a source's current names and reading it, the table's owner could rename a
    column and add another of the old name and a type of theirs; once the table is locked it
    cannot change, so what is read is what was checked. Raises :class:`SourceChangedError`
    when it changed meanwhile, IndexNotReadyError when it drifted.

    With the connection's ``pipeline``, the lock and the catalog read go in one round trip
    with what the pipeline holds before them (its BEGIN), each failing as it would alone.
    """
    if info.state in DRIFT_STATES:
        raise IndexNotReadyError(not_ready_message(info))
    lock = conn.execute(statement("source_lock", table=info.source.identifier))
    if pipeline is None:
        fresh = find_index(conn, info.index_schema, info.name)
    else:
        check_name(info.name)
        read = conn.execute(_catalog_get(info.index_schema), {"name": info.name})
        try:
            pipeline.sync()  # what the pipeline holds, the lock and the read: one round trip
        except psycopg.errors.UndefinedTable:
            if lock.pgresult is None:  # the lock failed (a cursor gets no result then)
                raise
            with _catalog_errors(info.index_schema):  # the read failed, as find_index's would
                raise
        row = read.fetchone()
        fresh = None if row is None else _index_info(info.index_schema, row)
    if fresh is None or fresh.source != info.source or fresh.state in DRIFT_STATES:
        raise SourceChangedError(
            f"the source table of index {info.name!r} changed while it was being read"
        )
    return fresh.source


def index_names(conn: PgConnection, schema: str) -> list[str]:
    """Names of all indexes, in order."""
    with _catalog_errors(schema):
        rows = conn.execute(statement("catalog_list", catalog=catalog(schema))).fetchall()
    return [str(name) for (name,) in rows]


@contextmanager
def _catalog_errors(schema: str) -> Iterator[None]:
    try:
        yield
    except psycopg.errors.UndefinedTable as exc:
        raise SchemaNotMigratedError.of(schema) from exc
