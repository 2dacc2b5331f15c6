"""Keys of any type reach the SQL dispatchers intact, and every argument is checked.

``near_key_v1`` and ``similar_key_v1`` cast their answers to the argument's type by OID, not by
the name ``pg_typeof()`` prints (``character``, which is ``char(1)``, truncated ``char(n)``
keys); they refuse a NULL index name and out-of-range limits with SQLSTATE 22023 (an
unknown index stays 42704, a NULL key still finds no rows).
The catalog's key types are qualified with their schema (a domain or an extension's type did
not resolve under the functions' pinned search_path).

Revision ID: 0004
Revises: 0003
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
CREATE OR REPLACE FUNCTION {schema}.near_key_v1(
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

_SIMILAR_KEY = """
CREATE OR REPLACE FUNCTION {schema}.similar_key_v1(
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

# The catalog's key types as source_columns in simindex/db/sql/source.sql now names them.
_QUALIFY_KEY_TYPES = """
UPDATE {schema}.indexes AS i
SET key_type = CASE
    WHEN e.typnamespace = 'pg_catalog'::regnamespace
      OR starts_with(format_type(a.atttypid, a.atttypmod), quote_ident(n.nspname) || '.')
    THEN format_type(a.atttypid, a.atttypmod)
    ELSE quote_ident(n.nspname) || '.' || format_type(a.atttypid, a.atttypmod)
END
FROM pg_catalog.pg_attribute AS a
JOIN pg_catalog.pg_type AS t ON t.oid = a.atttypid
JOIN pg_catalog.pg_type AS e
  ON e.oid = CASE WHEN t.typcategory = 'A' AND t.typelem <> 0 THEN t.typelem ELSE t.oid END
JOIN pg_catalog.pg_namespace AS n ON n.oid = e.typnamespace
WHERE a.attrelid = to_regclass(quote_ident(i.source_schema) || '.' || quote_ident(i.source_table))
  AND a.attname = i.key_column AND a.attnum > 0 AND NOT a.attisdropped
"""


# As revision 0001 created them, for the downgrade.
_NEAR_KEY_0001 = """
CREATE OR REPLACE FUNCTION {schema}.near_key_v1(
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

_SIMILAR_KEY_0001 = """
CREATE OR REPLACE FUNCTION {schema}.similar_key_v1(
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


def upgrade() -> None:
    for function in (_NEAR_KEY, _SIMILAR_KEY):
        op.execute(_fill(function))
    op.execute(_fill(_QUALIFY_KEY_TYPES))


def downgrade() -> None:
    # Revision 0001's functions again; qualified key types stay (valid type names for its code).
    for function in (_NEAR_KEY_0001, _SIMILAR_KEY_0001):
        op.execute(_fill(function))
