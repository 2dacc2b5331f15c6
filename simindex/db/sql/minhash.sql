-- A MinHash index (simindex.core.packing): one table, one row per document. What is the same
-- for every index (scoring, all pairs) is in the baseline migration: minhash_similarity_v1 and
-- minhash_pairs_of_table_v1; what names the index's table and band columns is generated here.

-- name: minhash_create_table
-- The shingle set's hash (identical sets), one 32-bit key per LSH band, and the one-bit
-- sketch the similarity is estimated from (last: the one column of variable width). A
-- build's staging table gets its primary key after the load (add_primary_key).
CREATE TABLE {table} (
    key {key_type} {key_constraint},
    set_hash bigint NOT NULL,
    {band_columns},
    sketch bit({sketch_bits}) NOT NULL
)

-- name: minhash_create_band_index
CREATE INDEX {index} ON {table} ({column})

-- name: minhash_create_set_index
-- The first band's index, which also holds the rows of each shingle set in key order: the rows
-- of one set share every band key, so a query reads the rows of its own set here, by its first
-- band key and its set hash (minhash_similar_function). One index in place of (b0) and
-- (set_hash, key): 13 bytes a row less (benchmarks/storage_churn.py).
CREATE INDEX {index} ON {table} ({column}, set_hash, key)

-- name: minhash_copy
COPY {table} (key, set_hash, {columns}, sketch) FROM STDIN

-- name: minhash_similar_function
-- The rows of the query's own shingle set (set_hash) score 1 exactly and come first, in key
-- order, read from the (b0, set_hash, key) index (a template's copies share every band key: never
-- through the BitmapOr); max_rows of them are the whole answer. The other candidates share
-- a band key with the query (a BitmapOr of the band indexes: each row is read once) and are
-- scored by minhash_similarity_v1 (leakproof: applied before the row-level security probe),
-- sorted, and probed in that order until the rest of max_rows are seen: a deleted or hidden
-- source row costs a probe, a candidate past the answer none. A text without features has
-- NULL arguments: no candidates. The order: similarity, then the rows of the query's own set
-- (identical) before other rows that estimate 1, then the key.
CREATE FUNCTION {function}(
    sketch bit varying,
    band_keys integer[],
    threshold double precision DEFAULT {threshold},
    max_rows integer DEFAULT {max_rows},
    set_hash bigint DEFAULT NULL
)
RETURNS TABLE (key {key_type}, similarity double precision, identical boolean)
LANGUAGE plpgsql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
-- A query of a few thousand rows starts no workers: a template's band keys, each shared by
-- thousands of rows, would otherwise get a parallel scan of the whole table (tens of ms).
SET max_parallel_workers_per_gather = 0
AS $body$
DECLARE
    simindex_current boolean;
    same bigint := 0;  -- rows of the query's own set answered
BEGIN
    {guard};
    PERFORM {usable}({index_name});
    -- NaN sorts above every number, so it fails the upper bound.
    IF $3 IS NULL OR NOT ($3 >= 0 AND $3 <= 1) THEN
        RAISE EXCEPTION 'threshold must be from 0 to 1, got %', coalesce($3::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF ($1 IS NULL) <> ($2 IS NULL)
       OR length($1) <> {sketch_bits} OR cardinality($2) <> {num_bands} THEN
        RAISE EXCEPTION 'a sketch of % bits and % band keys are needed (both NULL: a '
            'text without features), got % and %', {sketch_bits}, {num_bands},
            coalesce(length($1)::text, 'NULL'), coalesce(cardinality($2)::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF $4 < 1 THEN
        RAISE EXCEPTION 'max_rows must be at least 1, got %', $4 USING ERRCODE = '22023';
    END IF;
    IF $1 IS NULL THEN  -- no sketch, no row (similar_key's call of the guard alone)
        RETURN;
    END IF;
    -- The probes are LATERAL subqueries with a LIMIT: never pulled up into a join, so never a
    -- hash of the whole source, one primary-key probe a row (the inlined visible_key).
    IF $5 IS NOT NULL THEN
        RETURN QUERY SELECT c.key, 1.0::double precision, true
        FROM {table} AS c
        CROSS JOIN LATERAL (SELECT FROM {visible_key}(c.key) LIMIT 1) AS seen
        WHERE c.b0 = $2[1] AND c.set_hash = $5
        ORDER BY c.key
        LIMIT $4;
        GET DIAGNOSTICS same = ROW_COUNT;
        IF same >= $4 THEN
            RETURN;
        END IF;
    END IF;
    -- Then the other candidates (the bitmap still visits the rows of the query's set, on the
    -- pages they share, and drops them unscored).
    RETURN QUERY
    SELECT o.key, o.similarity, o.identical
    FROM (
        SELECT c.key, v.similarity, c.set_hash = $5 AS identical
        FROM {table} AS c
        CROSS JOIN LATERAL (SELECT {similarity}(c.sketch, $1) AS similarity) AS v
        WHERE ({any_band}) AND c.set_hash IS DISTINCT FROM $5 AND v.similarity >= $3
        ORDER BY v.similarity DESC, c.key
        OFFSET 0
    ) AS o
    -- Only keys the source holds: a deleted row's index rows stay until the worker's sweep.
    CROSS JOIN LATERAL (SELECT FROM {visible_key}(o.key) LIMIT 1) AS seen
    ORDER BY o.similarity DESC, o.key
    LIMIT $4 - same;
END
$body$

-- name: minhash_similar_key_function
-- The query by the stored row of a key, leaving the key itself out; its answers are those of
-- similar_v1 called with that row (the same order: similarity, the key's own set first, the
-- key), without its statements' second round of checks. One function, planned once per session
-- (a SQL function's body is planned again at every call), and one statement a call
-- (minhash_key_query): its plan takes the side table's lock (waiting for a rebuild's swap)
-- before its snapshot, in which the checks run once (an initplan, as simhash_query's:
-- query_ready_v1 judging the catalog row, whose side table must be the one the plan locked,
-- and the source), the key's row is read and the rows of its own set and the band candidates
-- are found from it (lateral to it: no round of variables between statements). A source
-- dropped fails the planning of that statement (the inlined visible_key names it): the
-- checks then run alone, in a statement that does not name it, and say so (55000).
-- Whether row-level security may apply is asked of the side table first (a name resolved
-- when the expression is first planned, not at each call): where it may, the candidates'
-- filter is minhash_similarity_v1 (leakproof), run before the policy's probe of the source
-- (minhash_key_scored); elsewhere the estimate is computed once a candidate
-- (minhash_key_scored_open). Its score is minhash_estimate: minhash_similarity_v1's
-- operations written out in the same order (so the same value), evaluated in the plan
-- without a call a row. It is not leakproof (# fails on bit strings of two lengths).
-- SECURITY INVOKER, without a SET search_path (as simhash_near_function): every name in it is
-- qualified, every operator pg_catalog's, so a call neither switches the caller's path nor
-- makes it be looked up again.
CREATE FUNCTION {function}(
    row_key {key_type}, threshold double precision DEFAULT {threshold},
    max_rows integer DEFAULT {max_rows}
)
RETURNS TABLE (key {key_type}, similarity double precision, identical boolean)
LANGUAGE plpgsql VOLATILE PARALLEL SAFE
SET plan_cache_mode = force_generic_plan
AS $body$
#variable_conflict use_column
BEGIN
    -- NaN sorts above every number, so it fails the upper bound.
    IF threshold IS NULL
       OR NOT (threshold OPERATOR(pg_catalog.>=) 0 AND threshold OPERATOR(pg_catalog.<=) 1) THEN
        RAISE EXCEPTION 'threshold must be from 0 to 1, got %', coalesce(threshold::pg_catalog.text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF max_rows OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'max_rows must be at least 1, got %', max_rows USING ERRCODE = '22023';
    END IF;
    BEGIN
        -- A policy may apply: the leakproof filter first; none does: the estimate once a row.
        IF pg_catalog.row_security_active({table_name}::pg_catalog.regclass) THEN
            RETURN QUERY {protected_query};
        ELSE
            RETURN QUERY {open_query};
        END IF;
    EXCEPTION WHEN undefined_table THEN
        PERFORM {checks};
        RAISE;
    END;
END
$body$

-- name: minhash_key_query
-- A query by key in one statement (minhash_similar_key_function). The key's row (none: the key
-- not indexed, or not the caller's to see, and no answer), then, lateral to it, appended in
-- this order and cut at max_rows: the rows of its own set (identical, scored 1: before every
-- other row), from the (b0, set_hash, key) index in key order, each probed in the source,
-- never through the BitmapOr (a template's copies, max_rows of them or more, are the whole
-- answer, and the band candidates are never read); then the other candidates, as similar_v1
-- finds them (a BitmapOr of the band indexes), sorted, then probed in the source in that order
-- until max_rows are seen (only keys the source holds: a deleted row's index rows stay until
-- the worker's sweep). The probes are LATERAL subqueries with a LIMIT: never pulled up into a
-- join, so never a hash of the whole source, one primary-key probe a row (the inlined
-- visible_key).
SELECT a.key, a.similarity, a.identical
FROM {table} AS s
CROSS JOIN LATERAL (
    (SELECT c.key, 1.0::double precision AS similarity, true AS identical
     FROM {table} AS c
     CROSS JOIN LATERAL (SELECT FROM {visible_key}(c.key) LIMIT 1) AS seen
     WHERE c.b0 OPERATOR(pg_catalog.=) s.b0
       AND c.set_hash OPERATOR(pg_catalog.=) s.set_hash
       AND c.key OPERATOR(pg_catalog.<>) s.key
     ORDER BY c.key
     LIMIT max_rows)
    UNION ALL
    (SELECT o.key, o.similarity, false
     FROM (
         SELECT r.key, r.similarity FROM ({scored}) AS r
         ORDER BY r.similarity DESC, r.key
         OFFSET 0
     ) AS o
     CROSS JOIN LATERAL (SELECT FROM {visible_key}(o.key) LIMIT 1) AS seen
     ORDER BY o.similarity DESC, o.key)
) AS a
WHERE s.key OPERATOR(pg_catalog.=) row_key
  AND {checks}
LIMIT max_rows

-- name: minhash_key_scored
-- Scored where row-level security may apply (minhash_key_query).
SELECT c.key, {estimate} AS similarity
        FROM {table} AS c
        WHERE ({any_band})
          AND c.set_hash OPERATOR(pg_catalog.<>) s.set_hash
          AND {similarity}(c.sketch, s.sketch) OPERATOR(pg_catalog.>=) threshold

-- name: minhash_key_scored_open
-- Scored where no policy applies, once a candidate (minhash_key_query).
SELECT x.key, x.similarity
        FROM (SELECT c.key, {estimate} AS similarity
              FROM {table} AS c
              WHERE ({any_band})
                AND c.set_hash OPERATOR(pg_catalog.<>) s.set_hash
              OFFSET 0) AS x
        WHERE x.similarity OPERATOR(pg_catalog.>=) threshold

-- name: minhash_estimate
-- minhash_similarity_v1 written out (minhash_similar_key_function).
GREATEST(0.0::double precision, 1.0::double precision
            OPERATOR(pg_catalog.-) (2.0::double precision
            OPERATOR(pg_catalog.*) pg_catalog.bit_count({a} OPERATOR(pg_catalog.#) {b})
            OPERATOR(pg_catalog./) pg_catalog.length({a})))

-- name: minhash_pairs_function
-- Every pair, for SQL callers: minhash_pairs_of_table_v1 over this index's table. Not a reader's right
-- (pairs_revoke_function): n identical rows make n(n-1)/2 pairs, which the Python path
-- collapses into groups. No SET work_mem: the caller's own settings govern its cost.
CREATE FUNCTION {function}(threshold double precision DEFAULT {threshold})
RETURNS TABLE (left_key {key_type}, right_key {key_type}, similarity double precision)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $body$
BEGIN
    PERFORM {usable}({index_name});
    IF $1 IS NULL OR NOT ($1 >= 0 AND $1 <= 1) THEN
        RAISE EXCEPTION 'threshold must be from 0 to 1, got %', $1 USING ERRCODE = '22023';
    END IF;
    -- Only keys the source holds: a deleted row's index rows stay until the worker's sweep.
    RETURN QUERY SELECT p.* FROM {pairs}({table_name}::regclass, NULL::{key_type}, {num_bands}, $1) AS p
    WHERE {visible}(p.left_key) AND {visible}(p.right_key);
END
$body$

-- name: minhash_pairs
-- One band's share of all pairs (the Python path; minhash_pairs_of_table_v1 is the same in SQL): rows
-- with the same band key, scored by their sketches, each pair once (left < right) and only in
-- the first band they share (the "earlier" conditions). The self-join reads only keys and band
-- keys, so its hash table stays small; sketches are fetched for the candidate pairs alone.
SELECT a.key AS left_key, b.key AS right_key,
    CASE WHEN a.set_hash = b.set_hash THEN 1.0::double precision
         ELSE {similarity}(a.sketch, b.sketch) END AS similarity
FROM (
    SELECT x.key AS left_key, y.key AS right_key
    FROM {table} AS x
    JOIN {table} AS y ON y.{column} = x.{column} AND x.key OPERATOR(pg_catalog.<) y.key
    OFFSET 0
) AS c
JOIN {table} AS a ON a.key OPERATOR(pg_catalog.=) c.left_key
JOIN {table} AS b ON b.key OPERATOR(pg_catalog.=) c.right_key
WHERE (a.set_hash = b.set_hash OR {similarity}(a.sketch, b.sketch) >= {threshold}){earlier}

-- name: minhash_insert
-- The sync worker's write: keys, set hashes, band keys (num_bands per key, in the keys'
-- order, a binary bigint array) and sketches (bit strings).
INSERT INTO {table} (key, set_hash, {columns}, sketch)
SELECT u.key, u.set_hash, {band_values}, u.sketch
FROM unnest(%(keys)s::{key_type}[], %(set_hashes)s::bigint[], %(sketches)s::bit varying[])
    WITH ORDINALITY AS u (key, set_hash, sketch, n)
CROSS JOIN LATERAL (SELECT %(bands)b::bigint[] AS b) AS h

-- name: minhash_delete
DELETE FROM {table} WHERE key OPERATOR(pg_catalog.=) ANY(%(keys)s::{key_type}[])

-- name: minhash_check_rows
SELECT s.{key}, s.{text}::text, g.set_hash, ARRAY[{band_columns}], g.sketch::text
FROM ONLY {source} AS s {sample}
LEFT JOIN {table} AS g ON g.key OPERATOR(pg_catalog.=) s.{key}

-- name: minhash_similar
-- max_rows NULL: every row (the function's own default is a bound, for SQL callers).
SELECT key, similarity, identical
FROM {function}(%(sketch)s::bit varying, %(band_keys)s::integer[], %(threshold)s,
                %(limit)s::integer, %(set_hash)s::bigint)
ORDER BY similarity DESC, identical DESC, key

-- name: minhash_similar_key
SELECT key, similarity, identical FROM {function}(%(key)s, %(threshold)s, %(limit)s::integer)
ORDER BY similarity DESC, identical DESC, key

-- name: minhash_key_indexed
SELECT true FROM {table} WHERE key OPERATOR(pg_catalog.=) %(key)s

-- name: minhash_exact_candidates
-- A query's rows (minhash_similar, minhash_similar_key) as exact verification takes them: the
-- key, whether it is of the query's own set (it scores 1 unread), and the stored set hash of
-- each other row (one text a set is read; NULL where the row is no longer there, a rebuild
-- having swapped the table meanwhile: that row's text is read). No similarity: the rows come
-- in the query's order, and the texts give the scores. The table is named first: a statement
-- that meets a rebuild's swap waits for its lock there, and looks up the query function after
-- the wait (the one the rebuild wrote; see minhash_similar_key_function).
-- Stored set hashes are the sets of the rows as they were synced: while a change waits in the
-- inbox, the queue or the failed items (pending, looked at once: an initplan), a row's stored
-- hash may be older than its text, and verification reads every text.
SELECT q.key, q.identical IS TRUE,
       CASE WHEN q.identical IS NOT TRUE THEN
           (SELECT m.set_hash FROM {table} AS m WHERE m.key OPERATOR(pg_catalog.=) q.key)
       END,
       (SELECT EXISTS (SELECT FROM {inbox}) OR EXISTS (SELECT FROM {queue})
               OR EXISTS (SELECT FROM {failed})) AS pending
FROM (SELECT FROM {table} LIMIT 0) AS swap
RIGHT JOIN ({query}) AS q ON true
ORDER BY q.similarity DESC, q.identical DESC, q.key
