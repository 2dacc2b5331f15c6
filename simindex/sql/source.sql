-- name: source_table
-- The table a user names, resolved like PostgreSQL resolves it (search_path unless qualified).
SELECT c.oid::bigint AS oid, n.nspname AS schema, c.relname AS name, c.relkind::text AS kind
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
WHERE c.oid = pg_catalog.to_regclass(%(qualified)s)

-- name: source_columns
SELECT a.attname AS name,
       pg_catalog.format_type(a.atttypid, a.atttypmod) AS type,
       t.typcategory::text AS category
FROM pg_catalog.pg_attribute AS a
JOIN pg_catalog.pg_type AS t ON t.oid = a.atttypid
WHERE a.attrelid = %(oid)s AND a.attnum > 0 AND NOT a.attisdropped

-- name: source_primary_key
SELECT array_agg(a.attname ORDER BY k.ordinality) AS columns
FROM pg_catalog.pg_index AS i
CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ordinality)
JOIN pg_catalog.pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
WHERE i.indrelid = %(oid)s AND i.indisprimary

-- name: source_unique_columns
-- Single columns with a unique, non-partial index: usable as a key besides the primary key.
SELECT a.attname AS name
FROM pg_catalog.pg_index AS i
JOIN pg_catalog.pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
WHERE i.indrelid = %(oid)s AND i.indisunique AND i.indnkeyatts = 1 AND i.indpred IS NULL
  AND i.indexprs IS NULL

-- name: source_row_estimate
SELECT GREATEST(c.reltuples, 0)::bigint FROM pg_catalog.pg_class AS c WHERE c.oid = %(oid)s

-- name: source_read
-- The build's read: a server-side cursor over key and text.
SELECT {key}, {text} FROM {table}

-- name: source_texts_of_keys
SELECT {key}, {text} FROM {table} WHERE {key} = ANY(%(keys)s)

-- name: source_schema_of
-- The schema of a table named as the search_path finds it (an offline migration's source);
-- the cast fails, naming the table, when there is none.
(SELECT n.nspname FROM pg_catalog.pg_class AS c
 JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
 WHERE c.oid = {table}::regclass)
