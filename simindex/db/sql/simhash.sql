-- name: simhash_create_table
-- One row per document: the fingerprint and one permuted copy per Manku table.
CREATE TABLE {table} (
    key {key_type} PRIMARY KEY,
    fingerprint bigint NOT NULL,
    {prefix_columns}
)

-- name: simhash_create_prefix_index
-- Covering, so a range scan checks candidates without visiting the heap.
CREATE INDEX {index} ON {table} ({column}) INCLUDE (fingerprint, key)

-- name: simhash_copy
COPY {table} (key, fingerprint, {columns}) FROM STDIN

-- name: simhash_candidates
-- One arm per Manku table: the rows sharing the query's permuted prefix, within the distance.
-- UNION of the arms removes a row found by two tables. The distance filter is within_distance_v1
-- (migration 0006), leakproof: applied before the row-level security probe (db.answers).
SELECT key, bit_count((fingerprint # {fingerprint})::bit(64))::integer AS distance
FROM {table}
WHERE {column} BETWEEN {low} AND {high}
  AND {within}(fingerprint, {fingerprint}, {max_distance})

-- name: simhash_fingerprint_of_key
SELECT fingerprint FROM {table} WHERE key OPERATOR(pg_catalog.=) %(key)s

-- name: simhash_near
-- max_rows NULL: every row (the function's own default is a bound, for SQL callers).
SELECT key, distance FROM {function}(%(fingerprint)s, %(max_distance)s, %(limit)s::integer)
ORDER BY distance, key

-- name: simhash_near_key
SELECT key, distance FROM {function}(%(key)s, %(max_distance)s, %(limit)s::integer)
ORDER BY distance, key

-- name: simhash_near_function
-- Typed per index, so the key comes back in the source key's own type (a domain's: its base).
CREATE FUNCTION {function}(
    fingerprint bigint,
    max_distance integer DEFAULT {default_distance},
    max_rows integer DEFAULT {max_rows}
)
RETURNS TABLE (key {key_type}, distance integer)
LANGUAGE plpgsql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
-- The query's shape never changes: plan it once per session, not per call (planning cost
-- more than running it), and dedupe the few rows by sorting, not by a hash table sized for
-- the generic plan's pessimistic row estimate.
SET plan_cache_mode = force_generic_plan
SET enable_hashagg = off
AS $body$
#variable_conflict use_column
DECLARE
    simindex_current boolean;
BEGIN
    {guard};
    PERFORM {usable}({index_name});
    IF max_distance IS NULL OR max_distance < 0 OR max_distance > {default_distance} THEN
        RAISE EXCEPTION 'max_distance must be from 0 to %, got %', {default_distance}, max_distance
            USING ERRCODE = '22023';
    END IF;
    IF $1 IS NULL THEN  -- no fingerprint, no row (near_key's call of the guard alone)
        RETURN;
    END IF;
    -- LIMIT NULL: every row.
    -- Only keys the source holds: a deleted row's index rows stay until the worker's sweep.
    RETURN QUERY SELECT a.key, a.distance FROM ({query}) AS a WHERE {visible}(a.key)
    ORDER BY 2, 1 LIMIT max_rows;
END
$body$

-- name: simhash_near_key_function
CREATE FUNCTION {function}(
    key {key_type}, max_distance integer DEFAULT {default_distance},
    max_rows integer DEFAULT {max_rows}
)
RETURNS TABLE (key {key_type}, distance integer)
LANGUAGE sql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $body$
    -- The table's lock first (a rebuild's swap is waited for here), then the query
    -- function's guard alone, no fingerprint: the next statement's snapshot sees the rebuilt
    -- table, or the guard fails where the transaction's cannot (see common.sql). In this
    -- order, the query function is looked up after the wait: the one the rebuild wrote.
    SELECT (SELECT true FROM {table} LIMIT 0),
           (SELECT count(*) FROM {near}(NULL::bigint, $2, 1));
    SELECT n.key, n.distance
    FROM {table} AS s, {near}(s.fingerprint, $2, $3 + 1) AS n
    WHERE s.key = $1 AND n.key <> $1 AND {usable}({index_name})
    ORDER BY n.distance, n.key
    LIMIT $3
$body$

-- name: simhash_upsert
-- The sync worker's write: rows as parallel arrays, one statement per batch. The bigint arrays
-- travel in binary: dumping them as text cost more than the statement itself.
INSERT INTO {table} AS t (key, fingerprint, {columns})
SELECT * FROM unnest(%(keys)s::{key_type}[], %(fingerprints)b::bigint[], {arrays})
ON CONFLICT (key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, {updates}

-- name: simhash_delete
DELETE FROM {table} WHERE key OPERATOR(pg_catalog.=) ANY(%(keys)s::{key_type}[])
