-- name: simhash_create_table
-- One row per document: the fingerprint, the prefix of each Manku table but the first (its
-- prefix bits packed into the smallest integer type that holds them, simhash_store.prefix_type)
-- and the key, in the order that wastes no alignment padding. The first table's prefix is the
-- fingerprint's top bits: its index is on the fingerprint itself. A build's staging table
-- gets its primary key after the load (add_primary_key): one sort, not an insert a row.
CREATE TABLE {table} (
    fingerprint bigint NOT NULL,
    {prefix_columns}key {key_type} {key_constraint}
)

-- name: simhash_create_prefix_index
-- One Manku table, covering, so a scan checks candidates without visiting the heap.
CREATE INDEX {index} ON {table} ({column}) INCLUDE ({included})

-- name: simhash_copy
COPY {table} (key, fingerprint{columns}) FROM STDIN

-- name: simhash_candidates
-- One Manku table's candidates: the rows sharing the query's prefix, within the distance, keys
-- and fingerprints (the distance is computed once, over every arm's rows: simhash_query). The
-- distance test is one of two, by whether row-level security may apply (simhash_near_function
-- plans both and runs one): where none does (a superuser's, the owner's, a worker's query),
-- the inlined SQL test, no function call a row; where it may, within_distance_v1, leakproof,
-- so it runs before the policy's probe of the source (db.answers). Each plan holds only its
-- own: every expression of a plan is compiled at every call, run or not.
SELECT t.key, t.fingerprint
FROM {table} AS t
WHERE {match}
  AND {distance_test}{earlier}

-- name: simhash_query
-- A SimHash query, nearest first. One arm per Manku table: the rows sharing the query's prefix
-- (one btree scan of the table's index), within the distance, and not found by an earlier arm
-- (a row that agrees with the query on an earlier table's prefix bits is that arm's), so the
-- arms never overlap and are appended, not deduplicated. The prefix test compares a column with
-- a value of the query alone, so it stays an index condition under row-level security.
-- Only keys the caller sees in the source (a deleted row's index rows stay until the worker's
-- sweep, ops.queue.sweep): visible_v1, called for the rows found. Not the inlined visible_key:
-- its source would be planned with the query, and a query of an index whose source was
-- dropped would fail planning it, not with the checks' error.
-- The checks (query_checks) are an initplan, run before any arm's scan (as a plain condition,
-- they would be a one-time filter of each arm, run once an arm); max_distance is checked
-- before, simhash_near_function. The arms' union is a fence (OFFSET 0): the conditions on its
-- rows (visible_v1, the key of a query by key left out) are one filter above the arms, not a
-- copy in each arm's filter (each compiled at every call, as the whole plan's expressions are).
SELECT c.key, d.distance
FROM{of_key} (
{arms}
OFFSET 0
) AS c
CROSS JOIN LATERAL (SELECT {distance}(c.fingerprint, {fingerprint}) AS distance) AS d
WHERE {checks}{also}
  AND {visible}(c.key)
ORDER BY d.distance, c.key
LIMIT {limit}

-- name: simhash_of_key
-- The stored row of a query's key, the row the arms of a query by key are lateral to: its
-- fingerprint and its prefixes (written from that fingerprint, so the arms compute none). No
-- row (the key not indexed, or not visible to the caller), no arm is scanned.
(SELECT s.fingerprint{prefixes} FROM {table} AS s WHERE s.key OPERATOR(pg_catalog.=) row_key) AS q

-- name: simhash_near
-- max_rows NULL: every row (the function's own default is a bound, for SQL callers).
SELECT key, distance FROM {function}(%(fingerprint)s, %(max_distance)s, %(limit)s::integer)
ORDER BY distance, key

-- name: simhash_near_function
-- Typed per index, so the key comes back in the source key's own type (a domain's: its base),
-- and naming its side table, so the planner sees the table's indexes. What is not the query is
-- static (simhash_query's checks). The query's shape never changes: planned once per session,
-- not per call (planning cost more than running it). max_distance is checked first, by a test
-- of the function's own (distance_allowed_v1, raising its error, called only when it fails: a
-- call in every query would cost more than the test). SECURITY INVOKER, without a SET
-- search_path: every name in its body is qualified, every operator pg_catalog's (OPERATOR()),
-- so nothing resolves on the caller's path, and a call neither switches the path and back nor
-- makes it be looked up again (by the regclass casts of the checks and, for a reader, of the
-- side table's policy). plan_cache_mode stays: without it, the first calls of a session and
-- any whose generic plan looks costlier would each plan the query again. Two queries, by
-- whether row-level security may apply to the side table (asked of it by a name resolved when
-- the test is first planned, not at each call): each with only its own distance test
-- (simhash_candidates).
CREATE FUNCTION {function}(
    fingerprint bigint,
    max_distance integer DEFAULT {default_distance},
    max_rows integer DEFAULT {max_rows}
)
RETURNS TABLE (key {key_type}, distance integer)
LANGUAGE plpgsql VOLATILE PARALLEL SAFE
SET plan_cache_mode = force_generic_plan
AS $body$
#variable_conflict use_column
BEGIN
    IF max_distance IS NULL OR max_distance OPERATOR(pg_catalog.<) 0
       OR max_distance OPERATOR(pg_catalog.>) {default_distance} THEN
        PERFORM {allowed}(max_distance, {default_distance});
    END IF;
    IF pg_catalog.row_security_active({table_name}::pg_catalog.regclass) THEN
        RETURN QUERY {protected_query};
    ELSE
        RETURN QUERY {open_query};
    END IF;
END
$body$

-- name: simhash_near_key_function
-- The query by the stored fingerprint of the key's row (simhash_of_key), leaving the row itself
-- out. One statement of a VOLATILE function: its plan takes the side table's lock (waiting for
-- a rebuild's swap) before the statement's snapshot, in which the key's row is read and the
-- query's checks run. Two queries, as simhash_near_function's.
CREATE FUNCTION {function}(
    row_key {key_type}, max_distance integer DEFAULT {default_distance},
    max_rows integer DEFAULT {max_rows}
)
RETURNS TABLE (key {key_type}, distance integer)
LANGUAGE plpgsql VOLATILE PARALLEL SAFE
SET plan_cache_mode = force_generic_plan
AS $body$
#variable_conflict use_column
BEGIN
    IF max_distance IS NULL OR max_distance OPERATOR(pg_catalog.<) 0
       OR max_distance OPERATOR(pg_catalog.>) {default_distance} THEN
        PERFORM {allowed}(max_distance, {default_distance});
    END IF;
    IF pg_catalog.row_security_active({table_name}::pg_catalog.regclass) THEN
        RETURN QUERY {protected_query};
    ELSE
        RETURN QUERY {open_query};
    END IF;
END
$body$

-- name: simhash_upsert
-- The sync worker's write: rows as parallel arrays, one statement per batch. The bigint arrays
-- travel in binary: dumping them as text cost more than the statement itself.
INSERT INTO {table} AS t (key, fingerprint{columns})
SELECT * FROM unnest(%(keys)s::{key_type}[], %(fingerprints)b::bigint[]{arrays})
ON CONFLICT (key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint{updates}

-- name: simhash_delete
DELETE FROM {table} WHERE key OPERATOR(pg_catalog.=) ANY(%(keys)s::{key_type}[])
