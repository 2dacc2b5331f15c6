"""The catalog of indexes, and simindex's SQL functions.

Revision ID: 0001
Revises:

Frozen history: this file spells out its tables instead of importing simindex.db.catalog, so that
later changes to the code never change what this revision did.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def schema() -> str:
    """The schema being migrated: the one holding the version table."""
    name = op.get_context().version_table_schema
    if not isinstance(name, str):
        raise RuntimeError("simindex's migrations run through simindex.migrate")
    return name


def _quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# Dispatchers by index name: each looks the index up in the catalog and calls that index's own
# typed function, so `simindex.near_key_v1('docs', 42)` answers with keys of the argument's type.
# No percent sign appears in them: offline (`--sql`) output doubles it.
_NEAR_KEY = """
CREATE FUNCTION {schema}.near_key_v1(
    index_name text, row_key anyelement, max_distance integer DEFAULT NULL
)
RETURNS TABLE (key anyelement, distance integer)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    entry record;
BEGIN
    SELECT i.method, i.key_type, (i.spec ->> 'max_distance')::integer AS max_distance
    INTO entry FROM {schema}.indexes AS i WHERE i.name = index_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '42704',
            MESSAGE = 'no simindex index named ' || quote_literal(index_name);
    END IF;
    IF entry.method <> 'simhash' THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'index ' || quote_literal(index_name) || ' is a MinHash index: '
                || 'use similar_key_v1';
    END IF;
    RETURN QUERY EXECUTE
        'SELECT n.key::' || pg_typeof(row_key)::text || ', n.distance FROM '
        || quote_ident({schema_literal}) || '.' || quote_ident(index_name || '_near_key_v1')
        || '($1::' || entry.key_type || ', $2) AS n'
    USING row_key, COALESCE(max_distance, entry.max_distance);
END
$body$
"""

_SIMILAR_KEY = """
CREATE FUNCTION {schema}.similar_key_v1(
    index_name text, row_key anyelement, threshold double precision DEFAULT NULL
)
RETURNS TABLE (key anyelement, similarity double precision)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    entry record;
BEGIN
    SELECT i.method, i.key_type, (i.spec ->> 'threshold')::double precision AS threshold
    INTO entry FROM {schema}.indexes AS i WHERE i.name = index_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '42704',
            MESSAGE = 'no simindex index named ' || quote_literal(index_name);
    END IF;
    IF entry.method <> 'minhash' THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'index ' || quote_literal(index_name) || ' is a SimHash index: '
                || 'use near_key_v1';
    END IF;
    RETURN QUERY EXECUTE
        'SELECT n.key::' || pg_typeof(row_key)::text || ', n.similarity FROM '
        || quote_ident({schema_literal}) || '.' || quote_ident(index_name || '_similar_key_v1')
        || '($1::' || entry.key_type || ', $2) AS n'
    USING row_key, COALESCE(threshold, entry.threshold);
END
$body$
"""


def upgrade() -> None:
    op.create_table(
        "indexes",
        sa.Column("id", sa.Integer(), sa.Identity(always=True), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("source_schema", sa.Text(), nullable=False),
        sa.Column("source_table", sa.Text(), nullable=False),
        sa.Column("key_column", sa.Text(), nullable=False),
        sa.Column("key_type", sa.Text(), nullable=False),
        sa.Column("text_column", sa.Text(), nullable=False),
        sa.Column("method", sa.Text(), nullable=False),
        sa.Column("spec", postgresql.JSONB(), nullable=False),
        sa.Column("spec_version", sa.Integer(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False, server_default=sa.text("'created'")),
        sa.Column("row_count", sa.BigInteger(), nullable=False, server_default=sa.text("0")),
        sa.Column("skipped_count", sa.BigInteger(), nullable=False, server_default=sa.text("0")),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.text("now()"),
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.text("now()"),
        ),
        sa.Column("built_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="indexes_pkey"),
        sa.UniqueConstraint("name", name="indexes_name_key"),
        sa.CheckConstraint("char_length(name) BETWEEN 1 AND 63", name="indexes_name_length"),
        sa.CheckConstraint("method IN ('simhash', 'minhash')", name="indexes_method_check"),
        sa.CheckConstraint(
            "state IN ('created', 'building', 'ready', 'failed')", name="indexes_state_check"
        ),
        sa.CheckConstraint("jsonb_typeof(spec) = 'object'", name="indexes_spec_check"),
        sa.CheckConstraint("spec_version >= 1", name="indexes_spec_version_check"),
        sa.CheckConstraint("row_count >= 0 AND skipped_count >= 0", name="indexes_counts_check"),
        schema=schema(),
    )

    # ---- SQL functions --------------------------------------------------------------------
    # Created here, after the catalog they read, each named with a _v1 suffix and qualified
    # with schema() (quote it), through op.execute so that `--sql` writes them too.
    quoted = _quote_identifier(schema())
    literal = "'" + schema().replace("'", "''") + "'"
    for function in (_NEAR_KEY, _SIMILAR_KEY):
        op.execute(function.replace("{schema}", quoted).replace("{schema_literal}", literal))
    # ---- end of SQL functions -------------------------------------------------------------


def downgrade() -> None:
    # ---- SQL functions --------------------------------------------------------------------
    # Dropped here, before the catalog they read, in reverse order of creation.
    quoted = _quote_identifier(schema())
    op.execute(f"DROP FUNCTION {quoted}.similar_key_v1(text, anyelement, double precision)")
    op.execute(f"DROP FUNCTION {quoted}.near_key_v1(text, anyelement, integer)")
    # ---- end of SQL functions -------------------------------------------------------------

    # The schema stays: Alembic records this downgrade in its version table there.
    op.drop_table("indexes", schema=schema())
