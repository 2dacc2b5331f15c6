"""The catalog table as SQLAlchemy declares it: the schema the code expects.

Migrations create it (``migrations/versions``) and a test compares the two (Alembic's
comparison of this metadata with the live schema), so a change here changes the migration too.
Kept apart from :mod:`simindex.db.catalog`, which reads the table with psycopg alone: only the
migrations and their tests load SQLAlchemy's schema machinery.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Identity,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    SmallInteger,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, OID, REGCLASS
from sqlalchemy.dialects.postgresql.base import ischema_names
from sqlalchemy.types import UserDefinedType

from simindex.db.catalog import (
    CLUSTERINGS,
    DEFAULT_SCHEMA,
    METHODS,
    NAME_MAX_LENGTH,
    STATES,
    check_schema,
)


class REGTYPE(UserDefinedType[int]):
    """PostgreSQL's ``regtype``: a type's OID that dumps as its name, so a restore finds it."""

    cache_ok = True

    def get_col_spec(self, **kw: object) -> str:
        return "REGTYPE"


# So that reflection (Alembic's comparison with the live schema) knows the type.
ischema_names.setdefault("regtype", REGTYPE)


def catalog_table(metadata: MetaData, schema: str = DEFAULT_SCHEMA) -> Table:
    """The catalog table ``indexes`` in ``schema``, added to ``metadata``.

    Each index's side tables and functions are named after its name (``docs_simhash``,
    ``docs_near_v1``), which :func:`simindex.index.check_name` keeps to plain identifiers.
    """
    check_schema(schema)
    return Table(
        "indexes",
        metadata,
        Column("id", Integer, Identity(always=True), nullable=False),
        Column("name", Text, nullable=False),
        Column("source_schema", Text, nullable=False),
        Column("source_table", Text, nullable=False),
        Column("key_column", Text, nullable=False),
        # The key's SQL type as format_type() prints it; side tables declare their key with it.
        Column("key_type", Text, nullable=False),
        Column("text_column", Text, nullable=False),
        Column("method", Text, nullable=False),
        Column("spec", JSONB, nullable=False),
        Column("spec_version", Integer, nullable=False),
        Column("state", Text, nullable=False, server_default=text("'created'")),
        Column("row_count", BigInteger, nullable=False, server_default=text("0")),
        # Rows whose text is NULL or empty: nothing to fingerprint.
        Column("skipped_count", BigInteger, nullable=False, server_default=text("0")),
        Column("created_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
        Column("updated_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
        Column("built_at", DateTime(timezone=True), nullable=True),
        # How the clusters table was last filled; "leader" ones are kept up to date by sync.
        Column("clustering", Text, nullable=True),
        # Set by the sync worker when a whole batch of this index fails (its table or a column
        # gone, a right revoked), cleared by the next batch that succeeds; the worker goes on
        # with the other indexes meanwhile. last_error stays after the index recovers.
        Column("broken", Boolean, nullable=False, server_default=text("false")),
        Column("last_error", Text, nullable=True),
        Column("last_error_at", DateTime(timezone=True), nullable=True),
        # The source as PostgreSQL knows it (names change, these do not): the table, and the
        # key and text columns by number and type. regclass and regtype dump as names, so a
        # restored database finds its tables and types again.
        Column("source", REGCLASS, nullable=True),
        # The table's OID when the index was made, as a number: a restore from a dump gives the
        # table another OID, which tells that its columns may be numbered anew.
        Column("source_oid", OID, nullable=True),
        Column("key_attnum", SmallInteger, nullable=True),
        Column("key_type_id", REGTYPE, nullable=True),
        Column("key_typmod", Integer, nullable=True),
        Column("text_attnum", SmallInteger, nullable=True),
        Column("text_type_id", REGTYPE, nullable=True),
        # Why the index is needs_rebuild or source_dropped.
        Column("state_reason", Text, nullable=True),
        # The side table the query functions read, recorded by the transaction that made it
        # (create, a build's swap): their swap guard compares it, as their snapshot sees it,
        # with the table they locked.
        Column("side", REGCLASS, nullable=True),
        PrimaryKeyConstraint("id", name="indexes_pkey"),
        UniqueConstraint("name", name="indexes_name_key"),
        CheckConstraint(
            f"char_length(name) BETWEEN 1 AND {NAME_MAX_LENGTH}", name="indexes_name_length"
        ),
        CheckConstraint(f"method IN ({_sql_list(METHODS)})", name="indexes_method_check"),
        CheckConstraint(f"state IN ({_sql_list(STATES)})", name="indexes_state_check"),
        CheckConstraint("jsonb_typeof(spec) = 'object'", name="indexes_spec_check"),
        CheckConstraint("spec_version >= 1", name="indexes_spec_version_check"),
        CheckConstraint(
            f"clustering IN ({_sql_list(CLUSTERINGS)})", name="indexes_clustering_check"
        ),
        CheckConstraint("row_count >= 0 AND skipped_count >= 0", name="indexes_counts_check"),
        schema=schema,
    )


def _sql_list(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{value}'" for value in values)
