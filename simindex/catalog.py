"""The catalog: one row per index, in simindex's own schema (layer 5, store).

This is the schema the code expects. Migrations create it (``migrations/versions``), and a test
compares the two, so a change here needs a new migration.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    Identity,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB

DEFAULT_SCHEMA = "simindex"
METHODS = ("simhash", "minhash")
STATES = ("created", "building", "ready", "failed")
CLUSTERINGS = ("pairs", "bottom_k", "leader")
NAME_MAX_LENGTH = 63
# PostgreSQL truncates identifiers to 63 bytes (NAMEDATALEN - 1).
_IDENTIFIER_MAX_BYTES = 63


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
