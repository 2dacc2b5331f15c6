-- The table a new index is made for, found by name by the caller (simindex's owner role may
-- not look into the app's schemas), for catalog_insert.
SELECT pg_catalog.set_config('simindex.source', '"public"."docs"'::regclass::oid::text, true);

-- The owner role names the key's type in the side tables, queue and functions it creates, so
-- it needs USAGE on the schema of that type (and of a domain's base types). A role that may
-- grant it (the schema's owner, a superuser) grants it here; otherwise create stops, saying
-- which GRANT to run. Nothing else of the schema is granted.
DO $body$
DECLARE
    found record;
BEGIN
    FOR found IN
        WITH RECURSIVE chain (oid, typtype, typbasetype) AS (
            SELECT t.oid, t.typtype, t.typbasetype FROM pg_catalog.pg_type AS t
            WHERE t.oid = pg_catalog.to_regtype('bigint')
            UNION ALL
            SELECT u.oid, u.typtype, u.typbasetype
            FROM chain JOIN pg_catalog.pg_type AS u ON u.oid = chain.typbasetype
            WHERE chain.typtype = 'd'
        )
        SELECT DISTINCT n.oid, n.nspname FROM chain
        JOIN pg_catalog.pg_type AS t ON t.oid = chain.oid
        JOIN pg_catalog.pg_namespace AS n ON n.oid = t.typnamespace
        WHERE NOT pg_catalog.has_schema_privilege('simindex_owner', n.oid, 'USAGE')
    LOOP
        IF NOT pg_catalog.has_schema_privilege(found.oid, 'USAGE WITH GRANT OPTION') THEN
            RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = pg_catalog.format(
                'simindex: its owner role %I needs USAGE on schema %I, where the key type %s '
                'is; the schema''s owner runs: GRANT USAGE ON SCHEMA %I TO %I',
                'simindex_owner', found.nspname, 'bigint', found.nspname, 'simindex_owner');
        END IF;
        EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA %I TO %I', found.nspname, 'simindex_owner');
    END LOOP;
END
$body$;

-- The caller's role ('none' when there was no SET ROLE), for role_restore.
SELECT pg_catalog.set_config('simindex.caller_role', pg_catalog.current_setting('role'), true);

SET LOCAL ROLE "simindex_owner";

-- Values as literals: the same statement runs from Python and goes into an Alembic --sql script.
-- The source's OID, column numbers and types are looked up when the statement runs (an offline
-- script knows only names; catalog_source_oid found the table by its name, with the caller's
-- rights); no row is inserted unless they all resolve.
INSERT INTO "simindex"."indexes" (name, source_schema, source_table, key_column, key_type, text_column,
                       method, spec, spec_version, source, source_oid, key_attnum,
                       key_type_id, key_typmod, text_attnum, text_type_id)
SELECT 'docs', n.nspname, c.relname, k.attname, 'bigint', t.attname,
       'minhash', '{"kind": "minhash", "num_bands": 15, "num_perm": 128, "rows_per_band": 7, "scheme": "one_permutation", "seed": 1, "shingling": {"seed": 0, "size": 3, "unit": "word", "with_characters": false}, "sketch_bits": 1792, "spec_version": 1, "threshold": 0.8}'::jsonb, 1, c.oid, c.oid, k.attnum, k.atttypid, k.atttypmod,
       t.attnum, t.atttypid
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_attribute AS k
  ON k.attrelid = c.oid AND k.attname = 'id' AND k.attnum > 0 AND NOT k.attisdropped
JOIN pg_catalog.pg_attribute AS t
  ON t.attrelid = c.oid AND t.attname = 'body' AND t.attnum > 0 AND NOT t.attisdropped
WHERE c.oid = pg_catalog.current_setting('simindex.source')::pg_catalog.oid;

-- Whether the caller sees the source row of a key: a primary-key probe with the caller's own
-- rights (SECURITY INVOKER), so the source's privileges and RLS policies decide. The body names
-- the source as it is now, every name qualified and the comparison pg_catalog's (the key type
-- describe() admitted); a string body records no dependency, so the app may still drop or
-- change its table (a rename is followed: the event triggers and every build write it again).
-- PL/pgSQL: its plan is made once per session (a SQL function's body would be planned again
-- for every query, costing more than its probes), a probe by the primary key, never a hash of
-- the whole source. No SET clause: a GUC saved and restored per row would cost more than the
-- probe.
-- Its body is not checked when it is made: the owner role may not see the source's schema.
SELECT pg_catalog.set_config('simindex.check_function_bodies',
                             pg_catalog.current_setting('check_function_bodies'), true),
       pg_catalog.set_config('check_function_bodies', 'off', true);
CREATE OR REPLACE FUNCTION "simindex"."docs_visible_v1"(key bigint)
RETURNS boolean LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $body$
BEGIN
    RETURN EXISTS (SELECT FROM "public"."docs" AS s WHERE s."id" OPERATOR(pg_catalog.=) $1);
END
$body$;
-- The same probe for a query of many keys: the key when the caller sees its source row, no row
-- otherwise. SQL, STABLE, without a SET clause: the planner inlines it into the query that
-- calls it (a query function's candidates, each probed by the primary key in that query's own
-- plan, about a microsecond each, where a call of the function above costs several). The
-- inlined body runs with the caller's rights, as the function above does.
CREATE OR REPLACE FUNCTION "simindex"."docs_visible_key_v1"(key bigint)
RETURNS SETOF bigint LANGUAGE sql STABLE PARALLEL SAFE
AS $body$
    SELECT s."id" FROM "public"."docs" AS s WHERE s."id" OPERATOR(pg_catalog.=) $1
$body$;
SELECT pg_catalog.set_config('check_function_bodies',
                             pg_catalog.current_setting('simindex.check_function_bodies'), true);

-- The shingle set's hash (identical sets), one 32-bit key per LSH band, and the one-bit
-- sketch the similarity is estimated from (last: the one column of variable width). A
-- build's staging table gets its primary key after the load (add_primary_key).
CREATE TABLE "simindex"."docs_minhash" (
    key bigint PRIMARY KEY,
    set_hash bigint NOT NULL,
    "b0" integer NOT NULL,
    "b1" integer NOT NULL,
    "b2" integer NOT NULL,
    "b3" integer NOT NULL,
    "b4" integer NOT NULL,
    "b5" integer NOT NULL,
    "b6" integer NOT NULL,
    "b7" integer NOT NULL,
    "b8" integer NOT NULL,
    "b9" integer NOT NULL,
    "b10" integer NOT NULL,
    "b11" integer NOT NULL,
    "b12" integer NOT NULL,
    "b13" integer NOT NULL,
    "b14" integer NOT NULL,
    sketch bit(1792) NOT NULL
);

-- Row-level security on a table of simindex's holding keys of the source: a role sees the rows
-- whose keys it could see in the source. A role that may DELETE from the table (a worker, an
-- admin: they read and write every row, and their privilege is checked first, without a probe)
-- sees all. The table by its OID, not tableoid: a system column would rule out the
-- index-only scans of the query functions. The owner role, which writes these tables for the triggers and builds, is not
-- subject to them. Writes are governed by the table's privileges alone.
ALTER TABLE "simindex"."docs_minhash" ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS simindex_read_v1 ON "simindex"."docs_minhash";
DROP POLICY IF EXISTS simindex_insert_v1 ON "simindex"."docs_minhash";
DROP POLICY IF EXISTS simindex_update_v1 ON "simindex"."docs_minhash";
DROP POLICY IF EXISTS simindex_delete_v1 ON "simindex"."docs_minhash";
CREATE POLICY simindex_read_v1 ON "simindex"."docs_minhash" FOR SELECT
    USING (pg_catalog.has_table_privilege('"simindex"."docs_minhash"'::regclass, 'DELETE') OR ("simindex"."docs_visible_v1"("key")));
CREATE POLICY simindex_insert_v1 ON "simindex"."docs_minhash" FOR INSERT WITH CHECK (true);
CREATE POLICY simindex_update_v1 ON "simindex"."docs_minhash" FOR UPDATE USING (true) WITH CHECK (true);
CREATE POLICY simindex_delete_v1 ON "simindex"."docs_minhash" FOR DELETE USING (true);

-- The side table the query functions read, recorded in the transaction that made it (see the
-- catalog's side column): a query whose snapshot predates it sees another one, or none.
UPDATE "simindex"."indexes" SET side = '"simindex"."docs_minhash"'::pg_catalog.regclass WHERE name = 'docs';

-- The first band's index, which also holds the rows of each shingle set in key order: the rows
-- of one set share every band key, so a query reads the rows of its own set here, by its first
-- band key and its set hash (minhash_similar_function). One index in place of (b0) and
-- (set_hash, key): 13 bytes a row less (benchmarks/storage_churn.py).
CREATE INDEX "docs_minhash_b0" ON "simindex"."docs_minhash" ("b0", set_hash, key);

CREATE INDEX "docs_minhash_b1" ON "simindex"."docs_minhash" ("b1");

CREATE INDEX "docs_minhash_b2" ON "simindex"."docs_minhash" ("b2");

CREATE INDEX "docs_minhash_b3" ON "simindex"."docs_minhash" ("b3");

CREATE INDEX "docs_minhash_b4" ON "simindex"."docs_minhash" ("b4");

CREATE INDEX "docs_minhash_b5" ON "simindex"."docs_minhash" ("b5");

CREATE INDEX "docs_minhash_b6" ON "simindex"."docs_minhash" ("b6");

CREATE INDEX "docs_minhash_b7" ON "simindex"."docs_minhash" ("b7");

CREATE INDEX "docs_minhash_b8" ON "simindex"."docs_minhash" ("b8");

CREATE INDEX "docs_minhash_b9" ON "simindex"."docs_minhash" ("b9");

CREATE INDEX "docs_minhash_b10" ON "simindex"."docs_minhash" ("b10");

CREATE INDEX "docs_minhash_b11" ON "simindex"."docs_minhash" ("b11");

CREATE INDEX "docs_minhash_b12" ON "simindex"."docs_minhash" ("b12");

CREATE INDEX "docs_minhash_b13" ON "simindex"."docs_minhash" ("b13");

CREATE INDEX "docs_minhash_b14" ON "simindex"."docs_minhash" ("b14");

ANALYZE "simindex"."docs_minhash";

-- The rows of the query's own shingle set (set_hash) score 1 exactly and come first, in key
-- order, read from the (b0, set_hash, key) index (a template's copies share every band key: never
-- through the BitmapOr); max_rows of them are the whole answer. The other candidates share
-- a band key with the query (a BitmapOr of the band indexes: each row is read once) and are
-- scored by minhash_similarity_v1 (leakproof: applied before the row-level security probe),
-- sorted, and probed in that order until the rest of max_rows are seen: a deleted or hidden
-- source row costs a probe, a candidate past the answer none. A text without features has
-- NULL arguments: no candidates. The order: similarity, then the rows of the query's own set
-- (identical) before other rows that estimate 1, then the key.
CREATE FUNCTION "simindex"."docs_similar_v1"(
    sketch bit varying,
    band_keys integer[],
    threshold double precision DEFAULT 0.8,
    max_rows integer DEFAULT 1000,
    set_hash bigint DEFAULT NULL
)
RETURNS TABLE (key bigint, similarity double precision, identical boolean)
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
    -- The first statement of a query function (VOLATILE, so each of its statements takes its own
-- snapshot). A rebuild swaps new side tables in (DROP and RENAME, in its transaction): a query
-- that meets the swap waits for the table's lock, and a statement whose snapshot was taken
-- before the rebuild committed would then read the new table and find it empty. This one takes
-- the lock (the scalar subquery's scan is never run) and asks whether its snapshot sees the
-- table it locked. Not seen: under READ COMMITTED the call is made again, by name, so it runs
-- the function as the rebuild wrote it with snapshots taken after the wait; in a REPEATABLE
-- READ or SERIALIZABLE transaction, whose snapshot cannot move, it fails as a serialization
-- failure, to be retried like one.
SELECT EXISTS (
    SELECT FROM pg_catalog.pg_class AS c WHERE c.oid = pg_catalog.to_regclass('"simindex"."docs_minhash"')
) OR (SELECT true FROM "simindex"."docs_minhash" LIMIT 0)
INTO simindex_current;
IF simindex_current IS NOT TRUE THEN
    IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION USING ERRCODE = '40001',
            MESSAGE = 'simindex: index ' || 'docs'
                || ' was rebuilt after this transaction''s snapshot was taken',
            HINT = 'Run the transaction again.';
    END IF;
    RETURN QUERY SELECT * FROM "simindex"."docs_similar_v1"($1, $2, $3, $4, $5);
    RETURN;
END IF;
    PERFORM "simindex"."source_usable_v1"('docs');
    -- NaN sorts above every number, so it fails the upper bound.
    IF $3 IS NULL OR NOT ($3 >= 0 AND $3 <= 1) THEN
        RAISE EXCEPTION 'threshold must be from 0 to 1, got %', coalesce($3::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF ($1 IS NULL) <> ($2 IS NULL)
       OR length($1) <> 1792 OR cardinality($2) <> 15 THEN
        RAISE EXCEPTION 'a sketch of % bits and % band keys are needed (both NULL: a '
            'text without features), got % and %', 1792, 15,
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
        FROM "simindex"."docs_minhash" AS c
        CROSS JOIN LATERAL (SELECT FROM "simindex"."docs_visible_key_v1"(c.key) LIMIT 1) AS seen
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
        FROM "simindex"."docs_minhash" AS c
        CROSS JOIN LATERAL (SELECT "simindex"."minhash_similarity_v1"(c.sketch, $1) AS similarity) AS v
        WHERE (c."b0" OPERATOR(pg_catalog.=) $2[1] OR c."b1" OPERATOR(pg_catalog.=) $2[2] OR c."b2" OPERATOR(pg_catalog.=) $2[3] OR c."b3" OPERATOR(pg_catalog.=) $2[4] OR c."b4" OPERATOR(pg_catalog.=) $2[5] OR c."b5" OPERATOR(pg_catalog.=) $2[6] OR c."b6" OPERATOR(pg_catalog.=) $2[7] OR c."b7" OPERATOR(pg_catalog.=) $2[8] OR c."b8" OPERATOR(pg_catalog.=) $2[9] OR c."b9" OPERATOR(pg_catalog.=) $2[10] OR c."b10" OPERATOR(pg_catalog.=) $2[11] OR c."b11" OPERATOR(pg_catalog.=) $2[12] OR c."b12" OPERATOR(pg_catalog.=) $2[13] OR c."b13" OPERATOR(pg_catalog.=) $2[14] OR c."b14" OPERATOR(pg_catalog.=) $2[15]) AND c.set_hash IS DISTINCT FROM $5 AND v.similarity >= $3
        ORDER BY v.similarity DESC, c.key
        OFFSET 0
    ) AS o
    -- Only keys the source holds: a deleted row's index rows stay until the worker's sweep.
    CROSS JOIN LATERAL (SELECT FROM "simindex"."docs_visible_key_v1"(o.key) LIMIT 1) AS seen
    ORDER BY o.similarity DESC, o.key
    LIMIT $4 - same;
END
$body$;

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
CREATE FUNCTION "simindex"."docs_similar_key_v1"(
    row_key bigint, threshold double precision DEFAULT 0.8,
    max_rows integer DEFAULT 1000
)
RETURNS TABLE (key bigint, similarity double precision, identical boolean)
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
        IF pg_catalog.row_security_active('"simindex"."docs_minhash"'::pg_catalog.regclass) THEN
            RETURN QUERY -- A query by key in one statement (minhash_similar_key_function). The key's row (none: the key
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
FROM "simindex"."docs_minhash" AS s
CROSS JOIN LATERAL (
    (SELECT c.key, 1.0::double precision AS similarity, true AS identical
     FROM "simindex"."docs_minhash" AS c
     CROSS JOIN LATERAL (SELECT FROM "simindex"."docs_visible_key_v1"(c.key) LIMIT 1) AS seen
     WHERE c.b0 OPERATOR(pg_catalog.=) s.b0
       AND c.set_hash OPERATOR(pg_catalog.=) s.set_hash
       AND c.key OPERATOR(pg_catalog.<>) s.key
     ORDER BY c.key
     LIMIT max_rows)
    UNION ALL
    (SELECT o.key, o.similarity, false
     FROM (
         SELECT r.key, r.similarity FROM (-- Scored where row-level security may apply (minhash_key_query).
SELECT c.key, -- minhash_similarity_v1 written out (minhash_similar_key_function).
GREATEST(0.0::double precision, 1.0::double precision
            OPERATOR(pg_catalog.-) (2.0::double precision
            OPERATOR(pg_catalog.*) pg_catalog.bit_count(c.sketch OPERATOR(pg_catalog.#) s.sketch)
            OPERATOR(pg_catalog./) pg_catalog.length(c.sketch))) AS similarity
        FROM "simindex"."docs_minhash" AS c
        WHERE (c."b0" OPERATOR(pg_catalog.=) s."b0" OR c."b1" OPERATOR(pg_catalog.=) s."b1" OR c."b2" OPERATOR(pg_catalog.=) s."b2" OR c."b3" OPERATOR(pg_catalog.=) s."b3" OR c."b4" OPERATOR(pg_catalog.=) s."b4" OR c."b5" OPERATOR(pg_catalog.=) s."b5" OR c."b6" OPERATOR(pg_catalog.=) s."b6" OR c."b7" OPERATOR(pg_catalog.=) s."b7" OR c."b8" OPERATOR(pg_catalog.=) s."b8" OR c."b9" OPERATOR(pg_catalog.=) s."b9" OR c."b10" OPERATOR(pg_catalog.=) s."b10" OR c."b11" OPERATOR(pg_catalog.=) s."b11" OR c."b12" OPERATOR(pg_catalog.=) s."b12" OR c."b13" OPERATOR(pg_catalog.=) s."b13" OR c."b14" OPERATOR(pg_catalog.=) s."b14")
          AND c.set_hash OPERATOR(pg_catalog.<>) s.set_hash
          AND "simindex"."minhash_similarity_v1"(c.sketch, s.sketch) OPERATOR(pg_catalog.>=) threshold) AS r
         ORDER BY r.similarity DESC, r.key
         OFFSET 0
     ) AS o
     CROSS JOIN LATERAL (SELECT FROM "simindex"."docs_visible_key_v1"(o.key) LIMIT 1) AS seen
     ORDER BY o.similarity DESC, o.key)
) AS a
WHERE s.key OPERATOR(pg_catalog.=) row_key
  AND -- A query function's checks (simhash_query, minhash_key_query), one scalar
-- subquery naming no column of the rows: run once per call, in the query's own snapshot, after
-- its plan took the side table's lock. One catalog row read: the side table the snapshot knows
-- (recorded by the transaction that made it, catalog_set_side; none seen, the snapshot is older
-- than the index) against the one this plan locked, and the source's state; the source's
-- existence from the relation cache (pg_table_is_visible is NULL for a table that is gone), no
-- catalog scan. query_ready_v1 judges them, called only when a test does not pass (no row, a
-- test false or NULL): a call in every query would cost more than the tests, which are the
-- same in both places.
(SELECT coalesce(
           (SELECT CASE
                WHEN i.side::pg_catalog.oid OPERATOR(pg_catalog.=) '"simindex"."docs_minhash"'::pg_catalog.regclass::pg_catalog.oid
                     AND i.state OPERATOR(pg_catalog.<>) 'source_dropped'
                     AND pg_catalog.pg_table_is_visible(i.source::pg_catalog.oid) IS NOT NULL
                THEN true
                ELSE "simindex"."query_ready_v1"(
                    'docs',
                    i.side::pg_catalog.oid OPERATOR(pg_catalog.=) '"simindex"."docs_minhash"'::pg_catalog.regclass::pg_catalog.oid,
                    i.state OPERATOR(pg_catalog.<>) 'source_dropped'
                        AND pg_catalog.pg_table_is_visible(i.source::pg_catalog.oid) IS NOT NULL)
                END
            FROM "simindex"."indexes" AS i WHERE i.name OPERATOR(pg_catalog.=) 'docs'),
           "simindex"."query_ready_v1"('docs', false, true)))
LIMIT max_rows;
        ELSE
            RETURN QUERY -- A query by key in one statement (minhash_similar_key_function). The key's row (none: the key
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
FROM "simindex"."docs_minhash" AS s
CROSS JOIN LATERAL (
    (SELECT c.key, 1.0::double precision AS similarity, true AS identical
     FROM "simindex"."docs_minhash" AS c
     CROSS JOIN LATERAL (SELECT FROM "simindex"."docs_visible_key_v1"(c.key) LIMIT 1) AS seen
     WHERE c.b0 OPERATOR(pg_catalog.=) s.b0
       AND c.set_hash OPERATOR(pg_catalog.=) s.set_hash
       AND c.key OPERATOR(pg_catalog.<>) s.key
     ORDER BY c.key
     LIMIT max_rows)
    UNION ALL
    (SELECT o.key, o.similarity, false
     FROM (
         SELECT r.key, r.similarity FROM (-- Scored where no policy applies, once a candidate (minhash_key_query).
SELECT x.key, x.similarity
        FROM (SELECT c.key, -- minhash_similarity_v1 written out (minhash_similar_key_function).
GREATEST(0.0::double precision, 1.0::double precision
            OPERATOR(pg_catalog.-) (2.0::double precision
            OPERATOR(pg_catalog.*) pg_catalog.bit_count(c.sketch OPERATOR(pg_catalog.#) s.sketch)
            OPERATOR(pg_catalog./) pg_catalog.length(c.sketch))) AS similarity
              FROM "simindex"."docs_minhash" AS c
              WHERE (c."b0" OPERATOR(pg_catalog.=) s."b0" OR c."b1" OPERATOR(pg_catalog.=) s."b1" OR c."b2" OPERATOR(pg_catalog.=) s."b2" OR c."b3" OPERATOR(pg_catalog.=) s."b3" OR c."b4" OPERATOR(pg_catalog.=) s."b4" OR c."b5" OPERATOR(pg_catalog.=) s."b5" OR c."b6" OPERATOR(pg_catalog.=) s."b6" OR c."b7" OPERATOR(pg_catalog.=) s."b7" OR c."b8" OPERATOR(pg_catalog.=) s."b8" OR c."b9" OPERATOR(pg_catalog.=) s."b9" OR c."b10" OPERATOR(pg_catalog.=) s."b10" OR c."b11" OPERATOR(pg_catalog.=) s."b11" OR c."b12" OPERATOR(pg_catalog.=) s."b12" OR c."b13" OPERATOR(pg_catalog.=) s."b13" OR c."b14" OPERATOR(pg_catalog.=) s."b14")
                AND c.set_hash OPERATOR(pg_catalog.<>) s.set_hash
              OFFSET 0) AS x
        WHERE x.similarity OPERATOR(pg_catalog.>=) threshold) AS r
         ORDER BY r.similarity DESC, r.key
         OFFSET 0
     ) AS o
     CROSS JOIN LATERAL (SELECT FROM "simindex"."docs_visible_key_v1"(o.key) LIMIT 1) AS seen
     ORDER BY o.similarity DESC, o.key)
) AS a
WHERE s.key OPERATOR(pg_catalog.=) row_key
  AND -- A query function's checks (simhash_query, minhash_key_query), one scalar
-- subquery naming no column of the rows: run once per call, in the query's own snapshot, after
-- its plan took the side table's lock. One catalog row read: the side table the snapshot knows
-- (recorded by the transaction that made it, catalog_set_side; none seen, the snapshot is older
-- than the index) against the one this plan locked, and the source's state; the source's
-- existence from the relation cache (pg_table_is_visible is NULL for a table that is gone), no
-- catalog scan. query_ready_v1 judges them, called only when a test does not pass (no row, a
-- test false or NULL): a call in every query would cost more than the tests, which are the
-- same in both places.
(SELECT coalesce(
           (SELECT CASE
                WHEN i.side::pg_catalog.oid OPERATOR(pg_catalog.=) '"simindex"."docs_minhash"'::pg_catalog.regclass::pg_catalog.oid
                     AND i.state OPERATOR(pg_catalog.<>) 'source_dropped'
                     AND pg_catalog.pg_table_is_visible(i.source::pg_catalog.oid) IS NOT NULL
                THEN true
                ELSE "simindex"."query_ready_v1"(
                    'docs',
                    i.side::pg_catalog.oid OPERATOR(pg_catalog.=) '"simindex"."docs_minhash"'::pg_catalog.regclass::pg_catalog.oid,
                    i.state OPERATOR(pg_catalog.<>) 'source_dropped'
                        AND pg_catalog.pg_table_is_visible(i.source::pg_catalog.oid) IS NOT NULL)
                END
            FROM "simindex"."indexes" AS i WHERE i.name OPERATOR(pg_catalog.=) 'docs'),
           "simindex"."query_ready_v1"('docs', false, true)))
LIMIT max_rows;
        END IF;
    EXCEPTION WHEN undefined_table THEN
        PERFORM -- A query function's checks (simhash_query, minhash_key_query), one scalar
-- subquery naming no column of the rows: run once per call, in the query's own snapshot, after
-- its plan took the side table's lock. One catalog row read: the side table the snapshot knows
-- (recorded by the transaction that made it, catalog_set_side; none seen, the snapshot is older
-- than the index) against the one this plan locked, and the source's state; the source's
-- existence from the relation cache (pg_table_is_visible is NULL for a table that is gone), no
-- catalog scan. query_ready_v1 judges them, called only when a test does not pass (no row, a
-- test false or NULL): a call in every query would cost more than the tests, which are the
-- same in both places.
(SELECT coalesce(
           (SELECT CASE
                WHEN i.side::pg_catalog.oid OPERATOR(pg_catalog.=) '"simindex"."docs_minhash"'::pg_catalog.regclass::pg_catalog.oid
                     AND i.state OPERATOR(pg_catalog.<>) 'source_dropped'
                     AND pg_catalog.pg_table_is_visible(i.source::pg_catalog.oid) IS NOT NULL
                THEN true
                ELSE "simindex"."query_ready_v1"(
                    'docs',
                    i.side::pg_catalog.oid OPERATOR(pg_catalog.=) '"simindex"."docs_minhash"'::pg_catalog.regclass::pg_catalog.oid,
                    i.state OPERATOR(pg_catalog.<>) 'source_dropped'
                        AND pg_catalog.pg_table_is_visible(i.source::pg_catalog.oid) IS NOT NULL)
                END
            FROM "simindex"."indexes" AS i WHERE i.name OPERATOR(pg_catalog.=) 'docs'),
           "simindex"."query_ready_v1"('docs', false, true)));
        RAISE;
    END;
END
$body$;

-- Every pair, for SQL callers: minhash_pairs_of_table_v1 over this index's table. Not a reader's right
-- (pairs_revoke_function): n identical rows make n(n-1)/2 pairs, which the Python path
-- collapses into groups. No SET work_mem: the caller's own settings govern its cost.
CREATE FUNCTION "simindex"."docs_pairs_v1"(threshold double precision DEFAULT 0.8)
RETURNS TABLE (left_key bigint, right_key bigint, similarity double precision)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $body$
BEGIN
    PERFORM "simindex"."source_usable_v1"('docs');
    IF $1 IS NULL OR NOT ($1 >= 0 AND $1 <= 1) THEN
        RAISE EXCEPTION 'threshold must be from 0 to 1, got %', $1 USING ERRCODE = '22023';
    END IF;
    -- Only keys the source holds: a deleted row's index rows stay until the worker's sweep.
    RETURN QUERY SELECT p.* FROM "simindex"."minhash_pairs_of_table_v1"('"simindex"."docs_minhash"'::regclass, NULL::bigint, 15, $1) AS p
    WHERE "simindex"."docs_visible_v1"(p.left_key) AND "simindex"."docs_visible_v1"(p.right_key);
END
$body$;

REVOKE ALL ON FUNCTION "simindex"."docs_pairs_v1" FROM PUBLIC;

-- The keys the app's statements changed, as their triggers append them: no index, no
-- constraint, one row per key a statement queued (a key changed twice is there twice), so a
-- write costs the app one plain append and never waits for a worker or another writer. What
-- only the keyed queue gives (one worker per key, in order) is the workers' business: they
-- move entries from here into it (sync_move). Entries a transaction has not committed are
-- invisible to the workers, so none reads a source row before its writer committed.
CREATE TABLE "simindex"."docs_inbox" (
    key bigint,
    queued_at timestamptz NOT NULL DEFAULT now()
);

-- Keys whose index rows must be recomputed from the source row as it is when a worker reads it.
-- One entry per key: a key changed twice before a worker comes is processed once. The workers'
-- coordination: the triggers append to the inbox, and a worker moves what committed there into
-- this table (sync_move) before it takes a batch from it (sync_take).
CREATE TABLE "simindex"."docs_queue" (
    key bigint PRIMARY KEY,
    queued_at timestamptz NOT NULL DEFAULT now()
);

-- Keys a worker could not process, with the last error; they stay out of the queue's way until
-- a retry (or a later change of the row) succeeds.
CREATE TABLE "simindex"."docs_failed" (
    key bigint PRIMARY KEY,
    error text NOT NULL,
    attempts integer NOT NULL DEFAULT 1,
    failed_at timestamptz NOT NULL DEFAULT now()
);

-- That deletes happened: one row per DELETE statement on the source, no key (the statement
-- trigger has no transition table). The worker consumes them and removes the index rows whose
-- source row is gone (sync_sweep_rows).
CREATE TABLE "simindex"."docs_deletes" (
    deleted_at timestamptz NOT NULL DEFAULT now()
);

-- Row-level security on a table of simindex's holding keys of the source: a role sees the rows
-- whose keys it could see in the source. A role that may DELETE from the table (a worker, an
-- admin: they read and write every row, and their privilege is checked first, without a probe)
-- sees all. The table by its OID, not tableoid: a system column would rule out the
-- index-only scans of the query functions. The owner role, which writes these tables for the triggers and builds, is not
-- subject to them. Writes are governed by the table's privileges alone.
ALTER TABLE "simindex"."docs_inbox" ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS simindex_read_v1 ON "simindex"."docs_inbox";
DROP POLICY IF EXISTS simindex_insert_v1 ON "simindex"."docs_inbox";
DROP POLICY IF EXISTS simindex_update_v1 ON "simindex"."docs_inbox";
DROP POLICY IF EXISTS simindex_delete_v1 ON "simindex"."docs_inbox";
CREATE POLICY simindex_read_v1 ON "simindex"."docs_inbox" FOR SELECT
    USING (pg_catalog.has_table_privilege('"simindex"."docs_inbox"'::regclass, 'DELETE') OR ("simindex"."docs_visible_v1"("key")));
CREATE POLICY simindex_insert_v1 ON "simindex"."docs_inbox" FOR INSERT WITH CHECK (true);
CREATE POLICY simindex_update_v1 ON "simindex"."docs_inbox" FOR UPDATE USING (true) WITH CHECK (true);
CREATE POLICY simindex_delete_v1 ON "simindex"."docs_inbox" FOR DELETE USING (true);

-- Row-level security on a table of simindex's holding keys of the source: a role sees the rows
-- whose keys it could see in the source. A role that may DELETE from the table (a worker, an
-- admin: they read and write every row, and their privilege is checked first, without a probe)
-- sees all. The table by its OID, not tableoid: a system column would rule out the
-- index-only scans of the query functions. The owner role, which writes these tables for the triggers and builds, is not
-- subject to them. Writes are governed by the table's privileges alone.
ALTER TABLE "simindex"."docs_queue" ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS simindex_read_v1 ON "simindex"."docs_queue";
DROP POLICY IF EXISTS simindex_insert_v1 ON "simindex"."docs_queue";
DROP POLICY IF EXISTS simindex_update_v1 ON "simindex"."docs_queue";
DROP POLICY IF EXISTS simindex_delete_v1 ON "simindex"."docs_queue";
CREATE POLICY simindex_read_v1 ON "simindex"."docs_queue" FOR SELECT
    USING (pg_catalog.has_table_privilege('"simindex"."docs_queue"'::regclass, 'DELETE') OR ("simindex"."docs_visible_v1"("key")));
CREATE POLICY simindex_insert_v1 ON "simindex"."docs_queue" FOR INSERT WITH CHECK (true);
CREATE POLICY simindex_update_v1 ON "simindex"."docs_queue" FOR UPDATE USING (true) WITH CHECK (true);
CREATE POLICY simindex_delete_v1 ON "simindex"."docs_queue" FOR DELETE USING (true);

-- Row-level security on a table of simindex's holding keys of the source: a role sees the rows
-- whose keys it could see in the source. A role that may DELETE from the table (a worker, an
-- admin: they read and write every row, and their privilege is checked first, without a probe)
-- sees all. The table by its OID, not tableoid: a system column would rule out the
-- index-only scans of the query functions. The owner role, which writes these tables for the triggers and builds, is not
-- subject to them. Writes are governed by the table's privileges alone.
ALTER TABLE "simindex"."docs_failed" ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS simindex_read_v1 ON "simindex"."docs_failed";
DROP POLICY IF EXISTS simindex_insert_v1 ON "simindex"."docs_failed";
DROP POLICY IF EXISTS simindex_update_v1 ON "simindex"."docs_failed";
DROP POLICY IF EXISTS simindex_delete_v1 ON "simindex"."docs_failed";
CREATE POLICY simindex_read_v1 ON "simindex"."docs_failed" FOR SELECT
    USING (pg_catalog.has_table_privilege('"simindex"."docs_failed"'::regclass, 'DELETE') OR ("simindex"."docs_visible_v1"("key")));
CREATE POLICY simindex_insert_v1 ON "simindex"."docs_failed" FOR INSERT WITH CHECK (true);
CREATE POLICY simindex_update_v1 ON "simindex"."docs_failed" FOR UPDATE USING (true) WITH CHECK (true);
CREATE POLICY simindex_delete_v1 ON "simindex"."docs_failed" FOR DELETE USING (true);

-- Fails here, not in a trigger, when the key's type has no such = operator, or one a full
-- join cannot use (random() keeps the join from being planned away).
SELECT FROM "simindex"."docs_queue" AS a FULL JOIN "simindex"."docs_queue" AS b ON a.key OPERATOR(pg_catalog.=) b.key
WHERE pg_catalog.random() < 0;

-- The one function behind an index's four triggers (a trigger with transition tables serves
-- one event). It runs as simindex's owner role (SECURITY DEFINER), so the app's roles need no
-- right on simindex's schema; nobody is granted EXECUTE, and it refuses every table but its
-- index's source, and every use but AFTER ... FOR EACH STATEMENT.
-- No column is read before its number, name and type are checked against what the index was
-- built for, from pg_attribute (which no snapshot makes stale): a column of another type is
-- never read, so no cast, operator or function the table's owner defined is evaluated here
-- (keys and texts are compared with built-in operators and casts), and a drifted source marks
-- the index instead of failing the write.
-- Fast path: the table and columns the function was written for, their names in the
-- statements. Where simindex's event triggers watch the database, nothing is looked up: any
-- ALTER TABLE of the source (or of its parents or row type) rewrites this function with the
-- literals marked simindex_trusted false first (schema.distrust_v1), in the same transaction,
-- so no write ever runs a trusted body on a changed table. Otherwise one pg_attribute lookup per column read
-- checks number, name and type. When that fails (a renamed table or column, a dropped column
-- before them, a restored database), the catalog's record is checked and the same statements
-- run with the columns renamed by position, "AS n (_1, k, _3, t)" (EXECUTE), until a build
-- writes this function afresh. Either way renames change nothing for the app.
-- Queueing is a plain append to the inbox (<name>_inbox: no index, no ON CONFLICT), the
-- cheapest write there is: the entries are invisible to every worker until this transaction
-- commits, so no worker reads a source row of theirs before the writer is done, and they are
-- this transaction's by their xmin, which the writer right's function checks
-- (session_index_own_function). Workers move committed entries into the keyed queue, each
-- move committed before a batch takes from the queue (sync_move); the one-worker-per-key order
-- lives there, and the app's statements never wait for it.
-- No NOTIFY: a transaction that notifies takes, at commit, a lock of the whole cluster and
-- holds it until its commit is flushed, so every app transaction writing an indexed table
-- would commit one after another (no group commit). Workers look at the inboxes instead
-- (sync_pending), every fraction of a second while they wait.
-- UPDATE queues the keys whose text changed (compared as text, byte for byte: a case-only
-- change of a citext counts), and both keys of a changed key (the old one's rows go).
-- DELETE records only that a delete happened (one row in <name>_deletes, no key, no transition
-- table): the index rows of the deleted keys are removed by the worker (sync_sweep_rows), and
-- until then no answer names them, since answers are filtered through the source. An append,
-- never an update of a shared row, so concurrent deletes never wait for each other.
-- INSERT and UPDATE, once their keys are queued, also remove the index rows of keys used again
-- while deletes are recorded (a key deleted, then inserted or another row's key changed to it,
-- before the sweep), so no answer names the new row by the old row's fingerprint. A batch may
-- have read the deleted row before the delete and not have written its index rows yet: the
-- queue entries of those keys are locked first (FOR KEY SHARE, sync_trigger_wait), which waits
-- for a batch holding one (every entry a batch takes is a committed one, see sync_move), and
-- under READ COMMITTED the next statement's snapshot sees what it wrote and every delete
-- recorded before. The lock waits for nothing else: a worker's move never waits for a lock
-- that is not a write, and no worker takes a locked entry (SKIP LOCKED) until this
-- transaction ends. A REPEATABLE READ or SERIALIZABLE transaction's snapshot may predate a
-- delete's record, so there the index rows of its new keys go always (a lookup by key; a key
-- never used before has none); the lock of an entry a batch consumed since that snapshot would
-- fail with a serialization failure and is let go (the wait is all it is for); should the
-- batch have rewritten the rows since that snapshot, the DELETE fails with a serialization
-- failure (40001), which such a transaction retries, and its retry removes what the batch
-- wrote.
-- TRUNCATE leaves the inbox, the queue and the failed items: their keys no longer exist, so a
-- worker deletes nothing for them (truncating them here could deadlock with a worker holding
-- them).
-- Replica mode (session_replication_role = replica: a logical replication subscription's apply,
-- which fires row triggers only, or a session set so): three row triggers, enabled REPLICA,
-- append each row's key (and a changed key's old one) to the inbox, and the statement triggers
-- leave INSERT, UPDATE and DELETE to them; a worker reads each row as it is then, or removes a
-- deleted key.
CREATE OR REPLACE FUNCTION "simindex"."docs_trigger_v1"() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    written_for boolean;
    source record;
    aliases text;
    replica boolean;
    key_name name;
    deleted boolean;
BEGIN
    -- The app's every write, in as few PL/pgSQL steps as there can be: each expression is set
    -- up again in every transaction, at about a quarter of what the write of a row costs, so
    -- no variable is initialised here and a one-row INSERT evaluates four: this test, its
    -- event, whether deletes are recorded, RETURN. The way for the table and columns this
    -- function was written for, trusted (the literal marked simindex_trusted, which
    -- distrust_v1 makes false), as an AFTER statement trigger outside replica mode; one
    -- statement then queues the keys and looks for recorded deletes. Everything
    -- else goes the way below.
    IF /* simindex_trusted */ true AND TG_RELID OPERATOR(pg_catalog.=) 16384
       AND TG_LEVEL = 'STATEMENT' AND TG_WHEN = 'AFTER'
       AND pg_catalog.current_setting('session_replication_role') <> 'replica' THEN
        IF TG_OP = 'INSERT' THEN
            -- The keys queued and whether the index rows of the new keys must go (deletes recorded, or a
-- snapshot that may predate one: see sync_trigger_if_deleted), in one statement.
WITH queued AS (
INSERT INTO "simindex"."docs_inbox" (key)
SELECT n."id" FROM new_rows AS n WHERE n."id" IS NOT NULL
)
SELECT EXISTS (SELECT FROM "simindex"."docs_deletes")
       OR pg_catalog.current_setting('transaction_isolation') <> 'read committed'
INTO deleted;
-- After sync_trigger_fast_queue: as sync_trigger_if_deleted, the keys queued already.
IF deleted THEN
    IF pg_catalog.current_setting('transaction_isolation') = 'read committed' THEN
        -- PERFORM, or SELECT in a statement run with EXECUTE (its rows discarded).
PERFORM FROM "simindex"."docs_queue" AS q
WHERE q.key OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT n."id" FROM new_rows AS n))
FOR KEY SHARE;
    ELSE
        BEGIN
            -- PERFORM, or SELECT in a statement run with EXECUTE (its rows discarded).
PERFORM FROM "simindex"."docs_queue" AS q
WHERE q.key OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT n."id" FROM new_rows AS n))
FOR KEY SHARE;
        EXCEPTION WHEN serialization_failure THEN
            NULL;  -- an entry a batch consumed since this snapshot: the batch is done
        END;
    END IF;
    DELETE FROM "simindex"."docs_minhash" AS s USING new_rows AS n WHERE s.key OPERATOR(pg_catalog.=) n."id";
END IF;
        ELSIF TG_OP = 'UPDATE' THEN
            -- The keys queued and whether the index rows of the new keys must go (deletes recorded, or a
-- snapshot that may predate one: see sync_trigger_if_deleted), in one statement.
WITH queued AS (
-- One pass (a hash full join on the key): new keys whose text differs from their old row's,
-- new keys without an old row and old keys without a new row (a key that changed).
INSERT INTO "simindex"."docs_inbox" (key)
SELECT coalesce(n."id", o."id")
FROM new_rows AS n
FULL JOIN old_rows AS o ON o."id" OPERATOR(pg_catalog.=) n."id"
WHERE coalesce(n."id", o."id") IS NOT NULL
  AND (n."id" IS NULL OR o."id" IS NULL
       OR (o."body"::text COLLATE pg_catalog."C")
          IS DISTINCT FROM (n."body"::text COLLATE pg_catalog."C"))
)
SELECT EXISTS (SELECT FROM "simindex"."docs_deletes")
       OR pg_catalog.current_setting('transaction_isolation') <> 'read committed'
INTO deleted;
-- After sync_trigger_fast_queue: as sync_trigger_if_deleted, the keys queued already.
IF deleted THEN
    IF pg_catalog.current_setting('transaction_isolation') = 'read committed' THEN
        -- The new keys without an old row, as sync_trigger_update_replaced finds them.
PERFORM FROM "simindex"."docs_queue" AS q
WHERE q.key OPERATOR(pg_catalog.=) ANY (ARRAY(
    SELECT n."id" FROM new_rows AS n
    WHERE NOT EXISTS (SELECT FROM old_rows AS o WHERE o."id" OPERATOR(pg_catalog.=) n."id")
))
FOR KEY SHARE;
    ELSE
        BEGIN
            -- The new keys without an old row, as sync_trigger_update_replaced finds them.
PERFORM FROM "simindex"."docs_queue" AS q
WHERE q.key OPERATOR(pg_catalog.=) ANY (ARRAY(
    SELECT n."id" FROM new_rows AS n
    WHERE NOT EXISTS (SELECT FROM old_rows AS o WHERE o."id" OPERATOR(pg_catalog.=) n."id")
))
FOR KEY SHARE;
        EXCEPTION WHEN serialization_failure THEN
            NULL;  -- an entry a batch consumed since this snapshot: the batch is done
        END;
    END IF;
    -- New keys without an old row (a key changed), found first (usually none: no index probe).
DELETE FROM "simindex"."docs_minhash" AS s
WHERE s.key OPERATOR(pg_catalog.=) ANY (ARRAY(
    SELECT n."id" FROM new_rows AS n
    WHERE NOT EXISTS (SELECT FROM old_rows AS o WHERE o."id" OPERATOR(pg_catalog.=) n."id")
));
END IF;
        ELSIF TG_OP = 'DELETE' THEN
            -- That a delete happened.
INSERT INTO "simindex"."docs_deletes" (deleted_at) VALUES (pg_catalog.now());
        ELSE
            TRUNCATE "simindex"."docs_minhash";
        END IF;
        RETURN NULL;
    END IF;
    replica := pg_catalog.current_setting('session_replication_role') = 'replica';
    IF TG_WHEN <> 'AFTER' OR (TG_LEVEL <> 'STATEMENT' AND NOT replica) THEN
        RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = 'simindex: ' || TG_NAME
            || ' must be an AFTER ... FOR EACH STATEMENT trigger of index ' || 'docs';
    END IF;
    IF TG_LEVEL = 'ROW' THEN
        -- The key column as recorded (number and type), read by its name of now.
        SELECT a.attname INTO key_name
        FROM "simindex"."indexes" AS i
        JOIN pg_catalog.pg_attribute AS a
          ON a.attrelid = i.source AND a.attnum = i.key_attnum AND a.atttypid = i.key_type_id
         AND a.atttypmod = i.key_typmod AND NOT a.attisdropped
        WHERE i.name = 'docs' AND i.source = TG_RELID
          AND i.state IN ('created', 'building', 'ready', 'failed');
        IF key_name IS NULL THEN
            PERFORM "simindex"."source_changed_v1"('docs', TG_RELID);
            RETURN NULL;
        END IF;
        IF TG_OP <> 'DELETE' THEN
            EXECUTE pg_catalog.format('-- A row''s key ($1, the row; the key column''s name goes where the mark is), for format().
INSERT INTO "simindex"."docs_inbox" (key) SELECT ($1).%1$I WHERE ($1).%1$I IS NOT NULL', key_name) USING NEW;
        END IF;
        IF TG_OP <> 'INSERT' THEN
            EXECUTE pg_catalog.format('-- A row''s key ($1, the row; the key column''s name goes where the mark is), for format().
INSERT INTO "simindex"."docs_inbox" (key) SELECT ($1).%1$I WHERE ($1).%1$I IS NOT NULL', key_name) USING OLD;
        END IF;
        RETURN NULL;
    END IF;
    IF replica AND TG_OP <> 'TRUNCATE' THEN
        RETURN NULL;  -- queued by the row triggers
    END IF;
    IF TG_RELID = 16384 THEN
        IF /* simindex_trusted */ true OR TG_OP IN ('TRUNCATE', 'DELETE') THEN
            written_for := true;
        ELSE
            SELECT true INTO written_for FROM pg_catalog.pg_attribute AS a
            WHERE a.attrelid = TG_RELID AND a.attnum = 1 AND a.attname = 'id'
              AND a.atttypid = 20 AND a.atttypmod =  -1
              AND NOT a.attisdropped;
            IF written_for AND TG_OP = 'UPDATE' THEN
                SELECT true INTO written_for FROM pg_catalog.pg_attribute AS a
                WHERE a.attrelid = TG_RELID AND a.attnum = 2
                  AND a.attname = 'body' AND a.atttypid = 25
                  AND NOT a.attisdropped;
            END IF;
        END IF;
    END IF;
    IF written_for THEN
        CASE TG_OP
            WHEN 'INSERT' THEN
                -- The keys queued; then a key used again keeps nothing of its deleted row (see the function's
-- comment): the batches holding its entry waited for, then its index rows removed. Under READ
-- COMMITTED the append and the look for recorded deletes are one statement (queue_checked):
-- a one-row write pays for one statement, not two.
IF pg_catalog.current_setting('transaction_isolation') = 'read committed' THEN
    -- The append, and whether deletes are recorded (into the function's variable "deleted").
WITH queued AS (
INSERT INTO "simindex"."docs_inbox" (key)
SELECT n."id" FROM new_rows AS n WHERE n."id" IS NOT NULL
)
SELECT EXISTS (SELECT FROM "simindex"."docs_deletes") INTO deleted;
    IF deleted THEN
        -- PERFORM, or SELECT in a statement run with EXECUTE (its rows discarded).
PERFORM FROM "simindex"."docs_queue" AS q
WHERE q.key OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT n."id" FROM new_rows AS n))
FOR KEY SHARE;
        DELETE FROM "simindex"."docs_minhash" AS s USING new_rows AS n WHERE s.key OPERATOR(pg_catalog.=) n."id";
    END IF;
ELSE
    INSERT INTO "simindex"."docs_inbox" (key)
SELECT n."id" FROM new_rows AS n WHERE n."id" IS NOT NULL;
    BEGIN
        -- PERFORM, or SELECT in a statement run with EXECUTE (its rows discarded).
PERFORM FROM "simindex"."docs_queue" AS q
WHERE q.key OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT n."id" FROM new_rows AS n))
FOR KEY SHARE;
    EXCEPTION WHEN serialization_failure THEN
        NULL;  -- an entry a batch consumed since this snapshot: the batch is done
    END;
    DELETE FROM "simindex"."docs_minhash" AS s USING new_rows AS n WHERE s.key OPERATOR(pg_catalog.=) n."id";
END IF;
            WHEN 'UPDATE' THEN
                -- The keys queued; then a key used again keeps nothing of its deleted row (see the function's
-- comment): the batches holding its entry waited for, then its index rows removed. Under READ
-- COMMITTED the append and the look for recorded deletes are one statement (queue_checked):
-- a one-row write pays for one statement, not two.
IF pg_catalog.current_setting('transaction_isolation') = 'read committed' THEN
    -- The append, and whether deletes are recorded (into the function's variable "deleted").
WITH queued AS (
-- One pass (a hash full join on the key): new keys whose text differs from their old row's,
-- new keys without an old row and old keys without a new row (a key that changed).
INSERT INTO "simindex"."docs_inbox" (key)
SELECT coalesce(n."id", o."id")
FROM new_rows AS n
FULL JOIN old_rows AS o ON o."id" OPERATOR(pg_catalog.=) n."id"
WHERE coalesce(n."id", o."id") IS NOT NULL
  AND (n."id" IS NULL OR o."id" IS NULL
       OR (o."body"::text COLLATE pg_catalog."C")
          IS DISTINCT FROM (n."body"::text COLLATE pg_catalog."C"))
)
SELECT EXISTS (SELECT FROM "simindex"."docs_deletes") INTO deleted;
    IF deleted THEN
        -- The new keys without an old row, as sync_trigger_update_replaced finds them.
PERFORM FROM "simindex"."docs_queue" AS q
WHERE q.key OPERATOR(pg_catalog.=) ANY (ARRAY(
    SELECT n."id" FROM new_rows AS n
    WHERE NOT EXISTS (SELECT FROM old_rows AS o WHERE o."id" OPERATOR(pg_catalog.=) n."id")
))
FOR KEY SHARE;
        -- New keys without an old row (a key changed), found first (usually none: no index probe).
DELETE FROM "simindex"."docs_minhash" AS s
WHERE s.key OPERATOR(pg_catalog.=) ANY (ARRAY(
    SELECT n."id" FROM new_rows AS n
    WHERE NOT EXISTS (SELECT FROM old_rows AS o WHERE o."id" OPERATOR(pg_catalog.=) n."id")
));
    END IF;
ELSE
    -- One pass (a hash full join on the key): new keys whose text differs from their old row's,
-- new keys without an old row and old keys without a new row (a key that changed).
INSERT INTO "simindex"."docs_inbox" (key)
SELECT coalesce(n."id", o."id")
FROM new_rows AS n
FULL JOIN old_rows AS o ON o."id" OPERATOR(pg_catalog.=) n."id"
WHERE coalesce(n."id", o."id") IS NOT NULL
  AND (n."id" IS NULL OR o."id" IS NULL
       OR (o."body"::text COLLATE pg_catalog."C")
          IS DISTINCT FROM (n."body"::text COLLATE pg_catalog."C"));
    BEGIN
        -- The new keys without an old row, as sync_trigger_update_replaced finds them.
PERFORM FROM "simindex"."docs_queue" AS q
WHERE q.key OPERATOR(pg_catalog.=) ANY (ARRAY(
    SELECT n."id" FROM new_rows AS n
    WHERE NOT EXISTS (SELECT FROM old_rows AS o WHERE o."id" OPERATOR(pg_catalog.=) n."id")
))
FOR KEY SHARE;
    EXCEPTION WHEN serialization_failure THEN
        NULL;  -- an entry a batch consumed since this snapshot: the batch is done
    END;
    -- New keys without an old row (a key changed), found first (usually none: no index probe).
DELETE FROM "simindex"."docs_minhash" AS s
WHERE s.key OPERATOR(pg_catalog.=) ANY (ARRAY(
    SELECT n."id" FROM new_rows AS n
    WHERE NOT EXISTS (SELECT FROM old_rows AS o WHERE o."id" OPERATOR(pg_catalog.=) n."id")
));
END IF;
            WHEN 'DELETE' THEN
                INSERT INTO "simindex"."docs_deletes" DEFAULT VALUES;
            WHEN 'TRUNCATE' THEN
                TRUNCATE "simindex"."docs_minhash";
        END CASE;
    ELSE
        -- Twice at most: a table restored from a dump has its columns found again by name
        -- (source_changed), then they are looked up anew.
        FOR attempt IN 1..2 LOOP
            SELECT count(*) FILTER (WHERE a.attnum <= i.key_attnum) AS key_position,
                   count(*) FILTER (WHERE a.attnum <= i.text_attnum) AS text_position,
                   bool_or(a.attnum = i.key_attnum AND a.atttypid = i.key_type_id
                           AND a.atttypmod = i.key_typmod)
                   AND bool_or(a.attnum = i.text_attnum AND a.atttypid = i.text_type_id)
                   -- restored from a dump (another OID): by name too, until renumbered
                   AND (bool_or(i.source_oid = TG_RELID)
                        OR bool_or(a.attnum = i.key_attnum AND a.attname = i.key_column)
                           AND bool_or(a.attnum = i.text_attnum AND a.attname = i.text_column))
                       AS as_recorded
            INTO source
            FROM "simindex"."indexes" AS i
            JOIN pg_catalog.pg_attribute AS a
              ON a.attrelid = i.source AND a.attnum > 0
             AND a.attnum <= greatest(i.key_attnum, i.text_attnum) AND NOT a.attisdropped
            WHERE i.name = 'docs' AND i.source = TG_RELID
              AND i.state IN ('created', 'building', 'ready', 'failed');
            EXIT WHEN source.as_recorded IS TRUE
                   OR NOT "simindex"."source_changed_v1"('docs', TG_RELID);
        END LOOP;
        IF source.as_recorded IS NOT TRUE THEN
            -- Another table (refused there), a drifted source (marked there) or an index that
            -- no longer follows its source: nothing to queue.
            RETURN NULL;
        END IF;
        SELECT string_agg(CASE p WHEN source.key_position THEN 'k'
                                 WHEN source.text_position THEN 't'
                                 ELSE '_' || p END, ', ' ORDER BY p)
        INTO aliases
        FROM generate_series(1, greatest(source.key_position, source.text_position)) AS p;
        CASE TG_OP
            WHEN 'INSERT' THEN
                -- The keys queued; then a key used again keeps nothing of its deleted row (see the function's
-- comment): the batches holding its entry waited for, then its index rows removed. Under READ
-- COMMITTED the append and the look for recorded deletes are one statement (queue_checked):
-- a one-row write pays for one statement, not two.
IF pg_catalog.current_setting('transaction_isolation') = 'read committed' THEN
    EXECUTE pg_catalog.format('-- The append, and whether deletes are recorded (into the function''s variable "deleted").
WITH queued AS (
INSERT INTO "simindex"."docs_inbox" (key)
SELECT n.k FROM new_rows AS n (%1$s) WHERE n.k IS NOT NULL
)
SELECT EXISTS (SELECT FROM "simindex"."docs_deletes")', aliases) INTO deleted;
    IF deleted THEN
        EXECUTE pg_catalog.format('-- PERFORM, or SELECT in a statement run with EXECUTE (its rows discarded).
SELECT FROM "simindex"."docs_queue" AS q
WHERE q.key OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT n.k FROM new_rows AS n (%1$s)))
FOR KEY SHARE', aliases);
        EXECUTE pg_catalog.format('DELETE FROM "simindex"."docs_minhash" AS s USING new_rows AS n (%1$s) WHERE s.key OPERATOR(pg_catalog.=) n.k', aliases);
    END IF;
ELSE
    EXECUTE pg_catalog.format('INSERT INTO "simindex"."docs_inbox" (key)
SELECT n.k FROM new_rows AS n (%1$s) WHERE n.k IS NOT NULL', aliases);
    BEGIN
        EXECUTE pg_catalog.format('-- PERFORM, or SELECT in a statement run with EXECUTE (its rows discarded).
SELECT FROM "simindex"."docs_queue" AS q
WHERE q.key OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT n.k FROM new_rows AS n (%1$s)))
FOR KEY SHARE', aliases);
    EXCEPTION WHEN serialization_failure THEN
        NULL;  -- an entry a batch consumed since this snapshot: the batch is done
    END;
    EXECUTE pg_catalog.format('DELETE FROM "simindex"."docs_minhash" AS s USING new_rows AS n (%1$s) WHERE s.key OPERATOR(pg_catalog.=) n.k', aliases);
END IF;
            WHEN 'UPDATE' THEN
                -- The keys queued; then a key used again keeps nothing of its deleted row (see the function's
-- comment): the batches holding its entry waited for, then its index rows removed. Under READ
-- COMMITTED the append and the look for recorded deletes are one statement (queue_checked):
-- a one-row write pays for one statement, not two.
IF pg_catalog.current_setting('transaction_isolation') = 'read committed' THEN
    EXECUTE pg_catalog.format('-- The append, and whether deletes are recorded (into the function''s variable "deleted").
WITH queued AS (
-- One pass (a hash full join on the key): new keys whose text differs from their old row''s,
-- new keys without an old row and old keys without a new row (a key that changed).
INSERT INTO "simindex"."docs_inbox" (key)
SELECT coalesce(n.k, o.k)
FROM new_rows AS n (%1$s)
FULL JOIN old_rows AS o (%1$s) ON o.k OPERATOR(pg_catalog.=) n.k
WHERE coalesce(n.k, o.k) IS NOT NULL
  AND (n.k IS NULL OR o.k IS NULL
       OR (o.t::text COLLATE pg_catalog."C")
          IS DISTINCT FROM (n.t::text COLLATE pg_catalog."C"))
)
SELECT EXISTS (SELECT FROM "simindex"."docs_deletes")', aliases) INTO deleted;
    IF deleted THEN
        EXECUTE pg_catalog.format('-- The new keys without an old row, as sync_trigger_update_replaced finds them.
SELECT FROM "simindex"."docs_queue" AS q
WHERE q.key OPERATOR(pg_catalog.=) ANY (ARRAY(
    SELECT n.k FROM new_rows AS n (%1$s)
    WHERE NOT EXISTS (SELECT FROM old_rows AS o (%1$s) WHERE o.k OPERATOR(pg_catalog.=) n.k)
))
FOR KEY SHARE', aliases);
        EXECUTE pg_catalog.format('-- New keys without an old row (a key changed), found first (usually none: no index probe).
DELETE FROM "simindex"."docs_minhash" AS s
WHERE s.key OPERATOR(pg_catalog.=) ANY (ARRAY(
    SELECT n.k FROM new_rows AS n (%1$s)
    WHERE NOT EXISTS (SELECT FROM old_rows AS o (%1$s) WHERE o.k OPERATOR(pg_catalog.=) n.k)
))', aliases);
    END IF;
ELSE
    EXECUTE pg_catalog.format('-- One pass (a hash full join on the key): new keys whose text differs from their old row''s,
-- new keys without an old row and old keys without a new row (a key that changed).
INSERT INTO "simindex"."docs_inbox" (key)
SELECT coalesce(n.k, o.k)
FROM new_rows AS n (%1$s)
FULL JOIN old_rows AS o (%1$s) ON o.k OPERATOR(pg_catalog.=) n.k
WHERE coalesce(n.k, o.k) IS NOT NULL
  AND (n.k IS NULL OR o.k IS NULL
       OR (o.t::text COLLATE pg_catalog."C")
          IS DISTINCT FROM (n.t::text COLLATE pg_catalog."C"))', aliases);
    BEGIN
        EXECUTE pg_catalog.format('-- The new keys without an old row, as sync_trigger_update_replaced finds them.
SELECT FROM "simindex"."docs_queue" AS q
WHERE q.key OPERATOR(pg_catalog.=) ANY (ARRAY(
    SELECT n.k FROM new_rows AS n (%1$s)
    WHERE NOT EXISTS (SELECT FROM old_rows AS o (%1$s) WHERE o.k OPERATOR(pg_catalog.=) n.k)
))
FOR KEY SHARE', aliases);
    EXCEPTION WHEN serialization_failure THEN
        NULL;  -- an entry a batch consumed since this snapshot: the batch is done
    END;
    EXECUTE pg_catalog.format('-- New keys without an old row (a key changed), found first (usually none: no index probe).
DELETE FROM "simindex"."docs_minhash" AS s
WHERE s.key OPERATOR(pg_catalog.=) ANY (ARRAY(
    SELECT n.k FROM new_rows AS n (%1$s)
    WHERE NOT EXISTS (SELECT FROM old_rows AS o (%1$s) WHERE o.k OPERATOR(pg_catalog.=) n.k)
))', aliases);
END IF;
            WHEN 'DELETE' THEN
                INSERT INTO "simindex"."docs_deletes" DEFAULT VALUES;
            WHEN 'TRUNCATE' THEN
                TRUNCATE "simindex"."docs_minhash";
        END CASE;
    END IF;
    RETURN NULL;
END
$body$;

REVOKE ALL ON FUNCTION "simindex"."docs_trigger_v1"() FROM PUBLIC;

-- The writer right's only way to write an index (simindex grant ROLE --writer): its
-- transaction indexes the keys its own statements changed, and no other. A key may be written
-- only when an inbox entry of it is visible here and was written by this transaction: its
-- xmin is a transaction in progress. Another transaction's uncommitted entry is invisible, so
-- a visible entry written by a transaction in progress is this one's (a subtransaction's too:
-- a savepoint's id is later than its parent's and 'in progress' while the parent is; one
-- rolled back is 'aborted' and its entry invisible). A writer has no right to write an entry
-- itself. Ids are 32-bit in the row: widened to xid8 as session_own_keys does (an entry whose
-- raw xmin widens to an id not yet given out, one frozen more than 2^31 ids ago, makes
-- pg_xact_status fail: the call fails, nothing is written).
-- Then, as the owner role: the keys' queue entries written (in key order, as sync_move
-- inserts them), which waits for a batch or a move holding one, and keeps every worker off
-- them until this transaction ends, so no batch writes a key's index rows from a version older
-- than this transaction's after it (the triggers' inbox entries wait for nothing); the side
-- rows of the keys written (written: rows of the side table as JSON) or removed; the failed
-- items (failures: key and error); and the entries consumed, the queue's and the inbox's.
-- Nothing but those keys is touched.
CREATE OR REPLACE FUNCTION "simindex"."docs_index_own_v1"(remove bigint[], written jsonb, failures jsonb)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    own_id bigint := pg_current_xact_id_if_assigned()::text::bigint;
    done bigint[];
    failed_keys bigint[];
    every_key bigint[];
BEGIN
    SELECT coalesce(array_agg(w.key), '{}') INTO done
    FROM jsonb_populate_recordset(NULL::"simindex"."docs_minhash", coalesce(written, '[]')) AS w;
    SELECT coalesce(array_agg(f.key), '{}') INTO failed_keys
    FROM jsonb_to_recordset(coalesce(failures, '[]')) AS f (key bigint, error text);
    every_key := coalesce(remove, '{}') || done || failed_keys;
    IF cardinality(every_key) = 0 THEN
        RETURN 0;
    END IF;
    IF array_position(every_key, NULL) IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'simindex: a key is NULL';
    END IF;
    IF own_id IS NULL OR EXISTS (
        WITH own AS (
            SELECT q.key FROM "simindex"."docs_inbox" AS q,
            LATERAL (
                SELECT pg_catalog.mod(q.xmin::text::bigint - pg_catalog.mod(own_id, 4294967296)
                                      + 4294967296, 4294967296) AS ahead
            ) AS d
            WHERE q.xmin::text::bigint >= 3
              AND d.ahead < 2147483648
              AND pg_xact_status((own_id + d.ahead)::text::xid8) = 'in progress'
        )
        SELECT FROM unnest(every_key) AS k (key)
        WHERE NOT EXISTS (SELECT FROM own WHERE own.key OPERATOR(pg_catalog.=) k.key)
    ) THEN
        RAISE EXCEPTION USING ERRCODE = '42501',
            MESSAGE = 'simindex: a writer''s transaction indexes only the keys it changed, '
                || 'and a key given was not changed by this transaction';
    END IF;
    INSERT INTO "simindex"."docs_queue" AS q (key)
    SELECT DISTINCT k.key FROM unnest(every_key) AS k (key) ORDER BY k.key
    ON CONFLICT (key) DO UPDATE SET queued_at = q.queued_at;
    DELETE FROM "simindex"."docs_minhash" AS t
    WHERE t.key OPERATOR(pg_catalog.=) ANY(coalesce(remove, '{}') || done);
    INSERT INTO "simindex"."docs_minhash"
    SELECT * FROM jsonb_populate_recordset(NULL::"simindex"."docs_minhash", coalesce(written, '[]'));
    INSERT INTO "simindex"."docs_failed" AS f (key, error)
    SELECT x.key, x.error
    FROM jsonb_to_recordset(coalesce(failures, '[]')) AS x (key bigint, error text)
    ON CONFLICT (key) DO UPDATE
    SET error = EXCLUDED.error, attempts = f.attempts + 1, failed_at = now();
    DELETE FROM "simindex"."docs_failed" AS f
    WHERE f.key OPERATOR(pg_catalog.=) ANY(coalesce(remove, '{}') || done)
      AND NOT f.key OPERATOR(pg_catalog.=) ANY(failed_keys);
    DELETE FROM "simindex"."docs_queue" AS q WHERE q.key OPERATOR(pg_catalog.=) ANY(every_key);
    -- Under READ COMMITTED, the entries other transactions appended for these keys too (they
    -- committed before this one wrote the rows: what it writes is newer), but those a move is
    -- taking; under REPEATABLE READ or SERIALIZABLE its own only (locking one a move took
    -- since the snapshot would fail to serialize).
    DELETE FROM "simindex"."docs_inbox" WHERE ctid = ANY(ARRAY(
        SELECT q.ctid FROM "simindex"."docs_inbox" AS q
        WHERE q.key OPERATOR(pg_catalog.=) ANY(every_key)
          AND (pg_catalog.current_setting('transaction_isolation') = 'read committed'
               OR pg_catalog.mod(q.xmin::text::bigint - pg_catalog.mod(own_id, 4294967296)
                                 + 4294967296, 4294967296) < 2147483648
                  AND q.xmin::text::bigint >= 3
                  AND pg_xact_status((own_id + pg_catalog.mod(
                          q.xmin::text::bigint - pg_catalog.mod(own_id, 4294967296)
                          + 4294967296, 4294967296))::text::xid8) = 'in progress')
        FOR UPDATE SKIP LOCKED
    ));
    RETURN cardinality(every_key);
END
$body$;
REVOKE ALL ON FUNCTION "simindex"."docs_index_own_v1" FROM PUBLIC;

-- The writer right on every index (simindex grant ROLE --writer, without --index) reaches an
-- index made later: the roles given default privileges by the owner role in simindex's schema
-- (a right on every index) that may execute share_index_v1 (a writer's or a worker's, not a
-- reader's) may execute this index's function too.
DO $body$
DECLARE
    found record;
BEGIN
    FOR found IN
        SELECT DISTINCT a.grantee
        FROM pg_catalog.pg_default_acl AS d
        CROSS JOIN LATERAL pg_catalog.aclexplode(d.defaclacl) AS a
        WHERE d.defaclrole OPERATOR(pg_catalog.=) (
                SELECT r.oid FROM pg_catalog.pg_roles AS r
                WHERE r.rolname OPERATOR(pg_catalog.=) 'simindex_owner')
          AND d.defaclnamespace OPERATOR(pg_catalog.=) (
                SELECT n.oid FROM pg_catalog.pg_namespace AS n
                WHERE n.nspname OPERATOR(pg_catalog.=) 'simindex')
          AND a.grantee OPERATOR(pg_catalog.<>) 0
          AND pg_catalog.has_function_privilege(a.grantee, '"simindex"."share_index_v1"(text)'::pg_catalog.regprocedure,
                                                'EXECUTE')
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I',
                                  '"simindex"."docs_index_own_v1"(bigint[], jsonb, jsonb)'::pg_catalog.regprocedure,
                                  pg_catalog.pg_get_userbyid(found.grantee));
    END LOOP;
END
$body$;

SELECT pg_catalog.set_config('role', pg_catalog.current_setting('simindex.caller_role'), true);

CREATE TRIGGER "simindex_docs_insert" AFTER INSERT ON "public"."docs"
REFERENCING NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION "simindex"."docs_trigger_v1"();

CREATE TRIGGER "simindex_docs_update" AFTER UPDATE ON "public"."docs"
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION "simindex"."docs_trigger_v1"();

CREATE TRIGGER "simindex_docs_delete" AFTER DELETE ON "public"."docs"

FOR EACH STATEMENT EXECUTE FUNCTION "simindex"."docs_trigger_v1"();

CREATE TRIGGER "simindex_docs_truncate" AFTER TRUNCATE ON "public"."docs"

FOR EACH STATEMENT EXECUTE FUNCTION "simindex"."docs_trigger_v1"();

CREATE TRIGGER "simindex_docs_insert_row" AFTER INSERT ON "public"."docs"
FOR EACH ROW EXECUTE FUNCTION "simindex"."docs_trigger_v1"();

CREATE TRIGGER "simindex_docs_update_row" AFTER UPDATE ON "public"."docs"
FOR EACH ROW EXECUTE FUNCTION "simindex"."docs_trigger_v1"();

CREATE TRIGGER "simindex_docs_delete_row" AFTER DELETE ON "public"."docs"
FOR EACH ROW EXECUTE FUNCTION "simindex"."docs_trigger_v1"();

-- The statement triggers fire whatever session_replication_role says, the row triggers in
-- replica mode only: rows a logical replication subscription applies, and writes of a session
-- set to replica, are queued too. (Only the table's owner may do this; CREATE TRIGGER alone
-- makes a trigger of origin and local mode.)
ALTER TABLE "public"."docs" ENABLE ALWAYS TRIGGER "simindex_docs_insert", ENABLE ALWAYS TRIGGER "simindex_docs_update", ENABLE ALWAYS TRIGGER "simindex_docs_delete", ENABLE ALWAYS TRIGGER "simindex_docs_truncate", ENABLE REPLICA TRIGGER "simindex_docs_insert_row", ENABLE REPLICA TRIGGER "simindex_docs_update_row", ENABLE REPLICA TRIGGER "simindex_docs_delete_row";
