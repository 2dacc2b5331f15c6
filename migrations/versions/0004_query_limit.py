"""The dispatching query functions take ``max_rows``: at most that many rows, the nearest.

Revision ID: 0004
Revises: 0003

Frozen history, like 0001: the functions are spelled out here. The limit is applied to the
index's own function's answer, so it works for indexes built by any release.
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def schema() -> str:
    name = op.get_context().version_table_schema
    if not isinstance(name, str):
        raise RuntimeError("simindex's migrations run through simindex.migrate")
    return name


def _quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# No percent sign appears in them: offline (`--sql`) output doubles it.
_DISPATCHER = """
CREATE FUNCTION {schema}.{function}(
    index_name text,
    row_key anyelement,
    {parameter} {parameter_type} DEFAULT NULL{max_rows_parameter}
)
RETURNS TABLE (key anyelement, {score} {score_type})
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    entry record;
BEGIN
    SELECT i.method, i.key_type, (i.spec ->> '{parameter}')::{parameter_type} AS fallback
    INTO entry FROM {schema}.indexes AS i WHERE i.name = index_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '42704',
            MESSAGE = 'no simindex index named ' || quote_literal(index_name);
    END IF;
    IF entry.method <> '{method}' THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'index ' || quote_literal(index_name) || ' is a {other_method} index: '
                || 'use {other_function}';
    END IF;
{max_rows_check}    RETURN QUERY EXECUTE
        'SELECT n.key::' || pg_typeof(row_key)::text || ', n.{score} FROM '
        || quote_ident({schema_literal}) || '.' || quote_ident(index_name || '_{suffix}')
        || '($1::' || entry.key_type || ', $2) AS n{tail}'
    USING row_key, COALESCE({parameter}, entry.fallback){max_rows_argument};
END
$body$
"""

_FUNCTIONS = (
    {
        "function": "near_key_v1",
        "parameter": "max_distance",
        "parameter_type": "integer",
        "score": "distance",
        "score_type": "integer",
        "method": "simhash",
        "other_method": "MinHash",
        "other_function": "similar_key_v1",
        "suffix": "near_key_v1",
        "order": "",
    },
    {
        "function": "similar_key_v1",
        "parameter": "threshold",
        "parameter_type": "double precision",
        "score": "similarity",
        "score_type": "double precision",
        "method": "minhash",
        "other_method": "SimHash",
        "other_function": "near_key_v1",
        "suffix": "similar_key_v1",
        "order": "DESC",
    },
)


_WITH_LIMIT = {
    "max_rows_parameter": ",\n    max_rows integer DEFAULT NULL",
    "max_rows_check": (
        "    IF max_rows < 1 THEN\n"
        "        RAISE EXCEPTION USING ERRCODE = '22023',\n"
        "            MESSAGE = 'max_rows must be at least 1, got ' || max_rows;\n"
        "    END IF;\n"
    ),
    "tail": " ORDER BY 2 {order}, 1 LIMIT $3",
    "max_rows_argument": ", max_rows",
}
# 0001's functions, for the downgrade.
_WITHOUT_LIMIT = dict.fromkeys(_WITH_LIMIT, "")


def _replace(with_limit: bool) -> None:
    quoted = _quote_identifier(schema())
    literal = "'" + schema().replace("'", "''") + "'"
    old_arguments = "" if with_limit else ", integer"
    for names in _FUNCTIONS:
        op.execute(
            f"DROP FUNCTION {quoted}.{names['function']}"
            f"(text, anyelement, {names['parameter_type']}{old_arguments})"
        )
        text = _DISPATCHER
        for name, value in (_WITH_LIMIT if with_limit else _WITHOUT_LIMIT).items():
            text = text.replace("{" + name + "}", value)
        text = text.replace("{schema}", quoted).replace("{schema_literal}", literal)
        for name, value in names.items():
            text = text.replace("{" + name + "}", value)
        op.execute(text)


def upgrade() -> None:
    _replace(with_limit=True)


def downgrade() -> None:
    _replace(with_limit=False)
