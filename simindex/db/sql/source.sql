-- name: source_table_oid
-- The table a user names, resolved like PostgreSQL resolves it (the caller's search_path
-- unless qualified: run on the caller's path, so it names every function it calls).
SELECT pg_catalog.to_regclass(%(qualified)s::pg_catalog.text)::pg_catalog.oid::pg_catalog.int8

-- name: source_table
-- The table source_table_oid found, with its parents and children by inheritance or
-- partitioning, which its triggers do not follow.
SELECT n.nspname AS schema, c.relname AS name, c.relkind::text AS kind,
       ARRAY(SELECT h.inhparent::regclass::text FROM pg_catalog.pg_inherits AS h
             WHERE h.inhrelid = c.oid ORDER BY 1) AS parents,
       ARRAY(SELECT h.inhrelid::regclass::text FROM pg_catalog.pg_inherits AS h
             WHERE h.inhparent = c.oid ORDER BY 1) AS children
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
WHERE c.oid = %(oid)s

-- name: source_columns
-- Each column's type as SQL can name it anywhere: typmod-exact (char(5), numeric(10,2)) and
-- qualified with its schema unless it is a built-in one (format_type() leaves out the schema
-- of a type visible on the caller's search_path, which the functions simindex installs do not
-- share). "keyable": the type (a domain: its base type) has a default btree operator class,
-- its own or one it is binary-coercible to (varchar: text's), so a side table can have it as
-- its primary key. Each column's number, its position (dropped columns not counted) and
-- whether its value becomes text by PostgreSQL's own means: no cast (I/O conversion), a binary
-- one, or a cast function owned by a superuser; never code the table's owner could have written.
SELECT a.attname AS name,
       CASE WHEN e.typnamespace = 'pg_catalog'::regnamespace
              OR starts_with(pg_catalog.format_type(a.atttypid, a.atttypmod),
                             pg_catalog.quote_ident(n.nspname) || '.')
            THEN pg_catalog.format_type(a.atttypid, a.atttypmod)
            ELSE pg_catalog.quote_ident(n.nspname) || '.'
                 || pg_catalog.format_type(a.atttypid, a.atttypmod)
       END AS type,
       -- The type simindex stores a value of the column as: a domain's base type, so that no
       -- domain CHECK (code the domain's owner wrote) runs when simindex writes or casts one.
       CASE WHEN bn.nspname = 'pg_catalog'
              OR starts_with(pg_catalog.format_type(b.oid, b.typmod),
                             pg_catalog.quote_ident(bn.nspname) || '.')
            THEN pg_catalog.format_type(b.oid, b.typmod)
            ELSE pg_catalog.quote_ident(bn.nspname) || '.'
                 || pg_catalog.format_type(b.oid, b.typmod)
       END AS stored_type,
       t.typcategory::text AS category,
       a.attnotnull AS not_null,
       EXISTS (
           SELECT FROM pg_catalog.pg_opclass AS o
           JOIN pg_catalog.pg_am AS m ON m.oid = o.opcmethod
           WHERE m.amname = 'btree' AND o.opcdefault
             AND (o.opcintype = b.oid
                  OR (o.opcintype = 'pg_catalog.anyenum'::regtype AND b.typtype = 'e')
                  OR (o.opcintype = 'pg_catalog.anyrange'::regtype AND b.typtype = 'r')
                  OR EXISTS (SELECT FROM pg_catalog.pg_cast AS c
                             WHERE c.castsource = b.oid AND c.casttarget = o.opcintype
                               AND c.castmethod = 'b'))
       ) AS keyable,
       a.attnum,
       row_number() OVER (ORDER BY a.attnum) AS position,
       a.atttypid::bigint AS type_id,
       a.atttypmod AS typmod,
       NOT EXISTS (
           SELECT FROM pg_catalog.pg_cast AS k
           JOIN pg_catalog.pg_proc AS p ON p.oid = k.castfunc
           JOIN pg_catalog.pg_roles AS r ON r.oid = p.proowner
           WHERE k.castsource IN (a.atttypid, b.oid)
             AND k.casttarget = 'pg_catalog.text'::pg_catalog.regtype
             AND k.castmethod = 'f' AND NOT r.rolsuper
       ) AS text_by_builtin_means
FROM pg_catalog.pg_attribute AS a
JOIN pg_catalog.pg_type AS t ON t.oid = a.atttypid
-- e: the type whose schema format_type() prints (of an array: its element type's)
JOIN pg_catalog.pg_type AS e
  ON e.oid = CASE WHEN t.typcategory = 'A' AND t.typelem <> 0 THEN t.typelem ELSE t.oid END
JOIN pg_catalog.pg_namespace AS n ON n.oid = e.typnamespace
-- b: the type under any domains, with the typmod the innermost domain gives it
CROSS JOIN LATERAL (
    WITH RECURSIVE base (oid, typtype, typbasetype, typmod) AS (
        SELECT t.oid, t.typtype, t.typbasetype, a.atttypmod
        UNION ALL
        SELECT u.oid, u.typtype, u.typbasetype, d.typtypmod
        FROM base
        JOIN pg_catalog.pg_type AS d ON d.oid = base.oid
        JOIN pg_catalog.pg_type AS u ON u.oid = base.typbasetype
        WHERE base.typtype = 'd'
    )
    SELECT base.oid, base.typtype, base.typmod FROM base WHERE base.typtype <> 'd'
) AS b
JOIN pg_catalog.pg_type AS bt ON bt.oid = b.oid
JOIN pg_catalog.pg_namespace AS bn ON bn.oid = bt.typnamespace
WHERE a.attrelid = %(oid)s AND a.attnum > 0 AND NOT a.attisdropped

-- name: source_primary_key
SELECT array_agg(a.attname ORDER BY k.ordinality) AS columns
FROM pg_catalog.pg_index AS i
CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ordinality)
JOIN pg_catalog.pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
WHERE i.indrelid = %(oid)s AND i.indisprimary AND i.indimmediate

-- name: source_unique_columns
-- Single columns with a unique, non-partial index checked at once (a deferrable one allows
-- duplicates within a statement): usable as a key besides the primary key.
SELECT a.attname AS name
FROM pg_catalog.pg_index AS i
JOIN pg_catalog.pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
WHERE i.indrelid = %(oid)s AND i.indisunique AND i.indnkeyatts = 1 AND i.indpred IS NULL
  AND i.indexprs IS NULL AND i.indimmediate

-- name: source_owned
-- Whether the current role acts as the table's owner (a member of the owning role, or a
-- superuser): only the owner may enable triggers ALWAYS.
SELECT pg_catalog.pg_has_role(c.relowner, 'USAGE'), c.relowner::regrole::text
FROM pg_catalog.pg_class AS c WHERE c.oid = %(oid)s

-- name: source_row_estimate
SELECT GREATEST(c.reltuples, 0)::bigint FROM pg_catalog.pg_class AS c WHERE c.oid = %(oid)s

-- name: source_lock
LOCK TABLE {table} IN ACCESS SHARE MODE

-- name: source_locked_begin
-- The transaction of a locked read on a connection in autocommit, begun in the same pipeline
-- as source_lock and the catalog read that checks the table (simindex.ops.verify).
BEGIN

-- name: source_locked_commit
-- Its end, in the same pipeline as the read.
COMMIT

-- name: source_count
SELECT count(*) FROM ONLY {table}

-- name: source_read
-- The build's read: a server-side cursor over key and text.
-- ONLY, as every read of a source: rows of an inheritance child are not the index's (its
-- writes are never queued); create refuses a table with children, drift_v1 marks one that gets them.
SELECT {key}, {text} FROM ONLY {table}

-- name: source_sample
-- The texts a build counts shingles in: a Bernoulli sample of the table, the same rows each time
-- while the table is unchanged.
SELECT {text} FROM ONLY {table} TABLESAMPLE BERNOULLI (%(percent)s) REPEATABLE (0)

-- name: source_texts_of_keys
SELECT {key}, {text} FROM ONLY {table} WHERE {key} OPERATOR(pg_catalog.=) ANY(%(keys)s)

-- name: source_key_comparable
-- Whether the key compares with operators found from pg_catalog alone (its own, a base
-- type's, or an implicit cast's: citext compares as text): simindex's functions pin their
-- search_path to pg_catalog, so an operator only found in an extension's schema (isn's ean13)
-- is out of their reach. Only prepared (parsed, operators resolved), never run: nothing of the
-- type's is evaluated by the role that creates the index (see source_key_unprepare).
PREPARE simindex_key_probe ({key_type}, {key_type}) AS
SELECT $1 OPERATOR(pg_catalog.=) $2, $1 OPERATOR(pg_catalog.<) $2

-- name: source_key_unprepare
DEALLOCATE simindex_key_probe

-- name: source_cast_key
-- A key given as text (on a command line) in the type simindex stores keys as.
SELECT CAST(%(key)s::text AS {key_type})

-- name: source_same_type
-- Whether a type a user names is the key's (spellings differ: int, integer, int4): the type
-- simindex stores it as, or the column's own (a domain).
SELECT %(given)s::regtype IN (%(found)s::regtype, %(column)s::oid)

-- name: source_check
-- What simindex.source.describe checks, for an offline migration's script, which has no
-- database to ask when it is written: it stops the script, before anything is created, when
-- the table, its text column or its key do not fit.
DO $check$
DECLARE
    source regclass := {table}::regclass;
    attribute record;
    stored oid;
    base oid;
BEGIN
    SELECT a.attnum, a.atttypid, t.typcategory INTO attribute
    FROM pg_catalog.pg_attribute AS a JOIN pg_catalog.pg_type AS t ON t.oid = a.atttypid
    WHERE a.attrelid = source AND a.attname = {column} AND a.attnum > 0 AND NOT a.attisdropped;
    IF NOT FOUND OR attribute.typcategory <> 'S' THEN
        RAISE EXCEPTION 'simindex: % has no text column %', source, {column}
            USING ERRCODE = '42703';
    END IF;
    SELECT a.attnum, a.atttypid, a.attnotnull INTO attribute
    FROM pg_catalog.pg_attribute AS a
    WHERE a.attrelid = source AND a.attname = {key} AND a.attnum > 0 AND NOT a.attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'simindex: key column % does not exist in %', {key}, source
            USING ERRCODE = '42703';
    END IF;
    -- simindex stores a domain's key as its base type (see source_columns): that is the
    -- key_type to give.
    stored := attribute.atttypid;
    LOOP
        SELECT t.typbasetype INTO base FROM pg_catalog.pg_type AS t
        WHERE t.oid = stored AND t.typtype = 'd';
        EXIT WHEN NOT FOUND;
        stored := base;
    END LOOP;
    IF stored <> {key_type}::regtype THEN
        RAISE EXCEPTION 'simindex: key column % of % is %, stored as %, but key_type % was '
            'given', {key}, source, attribute.atttypid::regtype, stored::regtype, {key_type}
            USING ERRCODE = '42804';
    END IF;
    IF NOT EXISTS (
        SELECT FROM pg_catalog.pg_index AS i
        WHERE i.indrelid = source AND i.indisunique AND i.indnkeyatts = 1
          AND i.indkey[0] = attribute.attnum AND i.indpred IS NULL AND i.indexprs IS NULL
    ) THEN
        RAISE EXCEPTION 'simindex: key column % has no unique index on %', {key}, source
            USING ERRCODE = '42P10';
    END IF;
    IF NOT attribute.attnotnull THEN
        RAISE EXCEPTION 'simindex: key column % of % allows NULL; make it NOT NULL or name '
            'another key', {key}, source USING ERRCODE = '23502';
    END IF;
END
$check$

-- name: source_policies_apply
-- Whether the source's row-level security applies to the current role: enabled, and the role
-- is no superuser, has no BYPASSRLS and has not the owner's rights (or the owner forces it).
SELECT c.relrowsecurity
       AND NOT (r.rolsuper OR r.rolbypassrls
                OR (pg_catalog.pg_has_role(c.relowner, 'USAGE') AND NOT c.relforcerowsecurity))
FROM pg_catalog.pg_class AS c, pg_catalog.pg_roles AS r
WHERE c.oid = %(oid)s AND r.rolname = current_user

-- name: source_row_security_off
-- Read the source without row-level security: no policy (code the table's owner wrote) runs
-- as the reader; a reader subject to a policy gets an error instead of a filtered table. The
-- value before, for source_row_security_restore.
SELECT s.previous, pg_catalog.set_config('row_security', 'off', true)
FROM (SELECT pg_catalog.current_setting('row_security')) AS s (previous)

-- name: source_row_security_restore
SELECT pg_catalog.set_config('row_security', %(previous)s, true)
