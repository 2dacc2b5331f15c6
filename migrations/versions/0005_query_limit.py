"""The dispatching query functions take ``max_rows``: at most that many rows, the nearest.

``near_key_v1`` and ``similar_key_v1`` as revision 0004 defined them (argument checks, answers
cast to the argument's type by OID), with a last ``max_rows integer DEFAULT 1000``: NULL is
every row, below 1 is refused with SQLSTATE 22023. The limit is applied to the index's own
function's answer, so it works for indexes built by any release.

Revision ID: 0005
Revises: 0004

Frozen history, like 0001: the functions are spelled out here.
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def schema() -> str:
    name = op.get_context().version_table_schema
    if not isinstance(name, str):
        raise RuntimeError("simindex's migrations run through simindex.migrate")
    return name


def _quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# No percent sign appears in them: offline (`--sql`) output doubles it. format_type(oid, -1)
# names the argument's own type without a typmod (bpchar, not character = char(1)), with its
# schema unless it is on the pinned search_path.
_CHECKS = """
    IF index_name IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'index_name must not be NULL';
    END IF;
    SELECT i.method, i.key_type, i.spec INTO entry
    FROM {schema}.indexes AS i WHERE i.name = index_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '42704',
            MESSAGE = 'no simindex index named ' || quote_literal(index_name);
    END IF;
"""

_NEAR_KEY = """
CREATE FUNCTION {schema}.near_key_v1(
    index_name text, row_key anyelement, max_distance integer DEFAULT NULL,
    max_rows integer DEFAULT 1000
)
RETURNS TABLE (key anyelement, distance integer)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    entry record;
    highest integer;
BEGIN
{checks}
    IF entry.method <> 'simhash' THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'index ' || quote_literal(index_name) || ' is a MinHash index: '
                || 'use similar_key_v1';
    END IF;
    highest := (entry.spec ->> 'max_distance')::integer;
    IF max_distance < 0 OR max_distance > highest THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'max_distance must be from 0 to the index''s ' || highest || ', got '
                || max_distance;
    END IF;
    IF max_rows < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'max_rows must be at least 1, got ' || max_rows;
    END IF;
    IF row_key IS NULL THEN
        RETURN;  -- as WHERE key = NULL: no row has a NULL key
    END IF;
    RETURN QUERY EXECUTE
        'SELECT n.key::' || format_type(pg_typeof(row_key), -1) || ', n.distance FROM '
        || quote_ident({schema_literal}) || '.' || quote_ident(index_name || '_near_key_v1')
        || '($1::' || entry.key_type || ', $2) AS n ORDER BY 2, 1 LIMIT $3'
    USING row_key, COALESCE(max_distance, highest), max_rows;
END
$body$
"""

_SIMILAR_KEY = """
CREATE FUNCTION {schema}.similar_key_v1(
    index_name text, row_key anyelement, threshold double precision DEFAULT NULL,
    max_rows integer DEFAULT 1000
)
RETURNS TABLE (key anyelement, similarity double precision)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    entry record;
BEGIN
{checks}
    IF entry.method <> 'minhash' THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'index ' || quote_literal(index_name) || ' is a SimHash index: '
                || 'use near_key_v1';
    END IF;
    -- NaN sorts above every number, so it fails the upper bound.
    IF NOT (threshold >= 0 AND threshold <= 1) THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'threshold must be from 0 to 1, got ' || threshold;
    END IF;
    IF max_rows < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'max_rows must be at least 1, got ' || max_rows;
    END IF;
    IF row_key IS NULL THEN
        RETURN;  -- as WHERE key = NULL: no row has a NULL key
    END IF;
    RETURN QUERY EXECUTE
        'SELECT n.key::' || format_type(pg_typeof(row_key), -1) || ', n.similarity FROM '
        || quote_ident({schema_literal}) || '.' || quote_ident(index_name || '_similar_key_v1')
        || '($1::' || entry.key_type || ', $2) AS n ORDER BY 2 DESC, 1 LIMIT $3'
    USING row_key, COALESCE(threshold, (entry.spec ->> 'threshold')::double precision),
        max_rows;
END
$body$
"""

# As revision 0004 created them, for the downgrade.
_NEAR_KEY_0004 = """
CREATE FUNCTION {schema}.near_key_v1(
    index_name text, row_key anyelement, max_distance integer DEFAULT NULL
)
RETURNS TABLE (key anyelement, distance integer)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    entry record;
    highest integer;
BEGIN
{checks}
    IF entry.method <> 'simhash' THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'index ' || quote_literal(index_name) || ' is a MinHash index: '
                || 'use similar_key_v1';
    END IF;
    highest := (entry.spec ->> 'max_distance')::integer;
    IF max_distance < 0 OR max_distance > highest THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'max_distance must be from 0 to the index''s ' || highest || ', got '
                || max_distance;
    END IF;
    IF row_key IS NULL THEN
        RETURN;  -- as WHERE key = NULL: no row has a NULL key
    END IF;
    RETURN QUERY EXECUTE
        'SELECT n.key::' || format_type(pg_typeof(row_key), -1) || ', n.distance FROM '
        || quote_ident({schema_literal}) || '.' || quote_ident(index_name || '_near_key_v1')
        || '($1::' || entry.key_type || ', $2) AS n'
    USING row_key, COALESCE(max_distance, highest);
END
$body$
"""

_SIMILAR_KEY_0004 = """
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
{checks}
    IF entry.method <> 'minhash' THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'index ' || quote_literal(index_name) || ' is a SimHash index: '
                || 'use near_key_v1';
    END IF;
    -- NaN sorts above every number, so it fails the upper bound.
    IF NOT (threshold >= 0 AND threshold <= 1) THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'threshold must be from 0 to 1, got ' || threshold;
    END IF;
    IF row_key IS NULL THEN
        RETURN;  -- as WHERE key = NULL: no row has a NULL key
    END IF;
    RETURN QUERY EXECUTE
        'SELECT n.key::' || format_type(pg_typeof(row_key), -1) || ', n.similarity FROM '
        || quote_ident({schema_literal}) || '.' || quote_ident(index_name || '_similar_key_v1')
        || '($1::' || entry.key_type || ', $2) AS n'
    USING row_key, COALESCE(threshold, (entry.spec ->> 'threshold')::double precision);
END
$body$
"""


def _fill(text: str) -> str:
    """``text`` with the schema filled in; a function's body goes between dollar quotes whose
    tag the filled-in body cannot contain (a schema named ``a$body$b`` would otherwise end it
    early); for any other name, the function it always was."""
    # E'' reads the same whatever standard_conforming_strings says.
    literal = "E'" + schema().replace("\\", "\\\\").replace("'", "''") + "'"
    head, body, tail = (
        part.replace("{checks}", _CHECKS)
        .replace("{schema}", _quote_identifier(schema()))
        .replace("{schema_literal}", literal)
        for part in (text.split("$body$") if "$body$" in text else ["", text, ""])
    )
    if not head:
        return body
    number = 0
    while True:
        tag = f"$body{number or ''}$"
        if (body + tag).find(tag) == len(body):
            return head + tag + body + tag + tail
        number += 1


def _replace(old_arguments: str, functions: tuple[str, str]) -> None:
    """Drop both dispatchers of the argument list ``old_arguments`` after the key, create
    ``functions`` (a new argument list is a new function: CREATE OR REPLACE cannot add one)."""
    quoted = _quote_identifier(schema())
    for name, parameter_type in (
        ("near_key_v1", "integer"),
        ("similar_key_v1", "double precision"),
    ):
        op.execute(
            f"DROP FUNCTION {quoted}.{name}(text, anyelement, {parameter_type}{old_arguments})"
        )
    for function in functions:
        op.execute(_fill(function))


def upgrade() -> None:
    _replace("", (_NEAR_KEY, _SIMILAR_KEY))


def downgrade() -> None:
    _replace(", integer", (_NEAR_KEY_0004, _SIMILAR_KEY_0004))
