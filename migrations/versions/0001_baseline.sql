-- The SQL of the baseline revision (0001_baseline.py reads it): simindex's schema as it is, made
-- in one step. {schema}, {schema_literal}, {owner}, {owner_literal}, {live_states}, {states},
-- {functions} and the event trigger names are filled in by the migration; DO bodies and
-- function bodies are quoted there with a dollar tag they cannot contain. No percent sign
-- appears here (an offline --sql script doubles it), hence || and quote_ident, not format.

-- name: role
-- The owner role: created when missing (a superuser or a CREATEROLE role may), and the user
-- migrating must be able to act as it (ALTER ... OWNER TO needs that).
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = {owner_literal}) THEN
        BEGIN
            CREATE ROLE {owner} NOLOGIN;
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE EXCEPTION USING ERRCODE = '42501',
                MESSAGE = 'simindex: the role ' || {owner_literal} || ' does not exist and '
                    || current_user || ' may not create it',
                HINT = 'a superuser runs once: CREATE ROLE ' || {owner_literal}
                    || ' NOLOGIN; GRANT ' || {owner_literal} || ' TO ' || current_user;
        END;
    END IF;
    IF NOT pg_catalog.pg_has_role(current_user, {owner_literal}, 'MEMBER') THEN
        BEGIN
            EXECUTE 'GRANT ' || quote_ident({owner_literal}) || ' TO ' || quote_ident(current_user);
        EXCEPTION WHEN insufficient_privilege OR invalid_grant_operation THEN
            RAISE EXCEPTION USING ERRCODE = '42501',
                MESSAGE = 'simindex: ' || current_user || ' is not a member of '
                    || {owner_literal} || ', which owns simindex''s schema',
                HINT = 'a superuser runs: GRANT ' || {owner_literal} || ' TO ' || current_user;
        END;
    END IF;
END

-- name: catalog
-- One row per index. The source as PostgreSQL knows it (names change, these do not): the table
-- (source, a regclass that dumps as its name; source_oid, the number it had, which tells a
-- restore from a dump), the key and text columns by number and type. side: the table the
-- index's query functions read, as the transaction that made it (create, build) recorded it,
-- so a query tells in its own snapshot whether that table is the one it locked.
CREATE TABLE {schema}.indexes (
    id integer GENERATED ALWAYS AS IDENTITY,
    name text NOT NULL,
    source_schema text NOT NULL,
    source_table text NOT NULL,
    key_column text NOT NULL,
    key_type text NOT NULL,
    text_column text NOT NULL,
    method text NOT NULL,
    spec jsonb NOT NULL,
    spec_version integer NOT NULL,
    state text NOT NULL DEFAULT 'created',
    row_count bigint NOT NULL DEFAULT 0,
    skipped_count bigint NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    built_at timestamptz,
    clustering text,
    broken boolean NOT NULL DEFAULT false,
    last_error text,
    last_error_at timestamptz,
    source regclass,
    source_oid oid,
    key_attnum smallint,
    key_type_id regtype,
    key_typmod integer,
    text_attnum smallint,
    text_type_id regtype,
    state_reason text,
    side regclass,
    CONSTRAINT indexes_pkey PRIMARY KEY (id),
    CONSTRAINT indexes_name_key UNIQUE (name),
    CONSTRAINT indexes_name_length CHECK (char_length(name) BETWEEN 1 AND 63),
    CONSTRAINT indexes_method_check CHECK (method IN ('simhash', 'minhash')),
    CONSTRAINT indexes_state_check CHECK (state IN ({states})),
    CONSTRAINT indexes_spec_check CHECK (jsonb_typeof(spec) = 'object'),
    CONSTRAINT indexes_spec_version_check CHECK (spec_version >= 1),
    CONSTRAINT indexes_clustering_check CHECK (clustering IN ('pairs', 'bottom_k', 'leader')),
    CONSTRAINT indexes_counts_check CHECK (row_count >= 0 AND skipped_count >= 0)
)

-- name: near_key_v1
-- Dispatchers by index name: each looks the index up in the catalog and calls that index's own
-- typed function, so near_key_v1('docs', 42) answers with keys of the argument's type
-- (cast by OID: format_type(oid, -1) names the argument's own type without a typmod, bpchar
-- rather than character = char(1), with its schema unless it is on the pinned search_path),
-- at most max_rows of them (NULL: every row), the nearest first. VOLATILE, so the typed
-- function's query takes its snapshot after its wait for a rebuild's swap (see query_ready_v1).
CREATE FUNCTION {schema}.near_key_v1(
    index_name text, row_key anyelement, max_distance integer DEFAULT NULL,
    max_rows integer DEFAULT 1000
)
RETURNS TABLE (key anyelement, distance integer)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    entry record;
    highest integer;
BEGIN
    IF index_name IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'index_name must not be NULL';
    END IF;
    SELECT i.method, i.key_type, i.spec INTO entry
    FROM {schema}.indexes AS i WHERE i.name = index_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '42704',
            MESSAGE = 'no simindex index named ' || quote_literal(index_name);
    END IF;
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
        || '($1::' || entry.key_type || ', $2, $3) AS n ORDER BY 2, 1 LIMIT $3'
    USING row_key, COALESCE(max_distance, highest), max_rows;
END
$body$

-- name: similar_key_v1
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
    IF index_name IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'index_name must not be NULL';
    END IF;
    SELECT i.method, i.key_type, i.spec INTO entry
    FROM {schema}.indexes AS i WHERE i.name = index_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '42704',
            MESSAGE = 'no simindex index named ' || quote_literal(index_name);
    END IF;
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

-- name: ownership
-- Everything in the schema to the owner role (the schema may have been made by whoever migrated,
-- the version table is Alembic's).
DECLARE
    found record;
BEGIN
    EXECUTE 'ALTER SCHEMA ' || quote_ident({schema_literal}) || ' OWNER TO '
        || quote_ident({owner_literal});
    FOR found IN
        SELECT c.oid::regclass AS relation FROM pg_catalog.pg_class AS c
        WHERE c.relnamespace = (SELECT n.oid FROM pg_catalog.pg_namespace AS n
                                WHERE n.nspname = {schema_literal})
          AND c.relkind IN ('r', 'p', 'v')
    LOOP
        EXECUTE 'ALTER TABLE ' || found.relation::text || ' OWNER TO '
            || quote_ident({owner_literal});
    END LOOP;
    FOR found IN
        SELECT p.oid::regprocedure AS routine FROM pg_catalog.pg_proc AS p
        WHERE p.pronamespace = (SELECT n.oid FROM pg_catalog.pg_namespace AS n
                                WHERE n.nspname = {schema_literal})
    LOOP
        EXECUTE 'ALTER ROUTINE ' || found.routine::text || ' OWNER TO '
            || quote_ident({owner_literal});
    END LOOP;
END

-- name: drift_v1
-- Why index i no longer follows its source, or NULL. The source is known by OID and its key and
-- text columns by number and type, so renames change nothing. A column found under its
-- recorded name at another number, in a table of another OID than the one recorded (source_oid,
-- which dumps as a number where source dumps as a name), was renumbered by a restore from a
-- dump (the columns numbered anew, dropped ones left out): follow_source_v1 finds it again by
-- name (the names the catalog holds are current where the event triggers watch). And since a write the
-- triggers do not see leaves the index stale: each of the index's four triggers on the table,
-- enabled ALWAYS (replica mode too), and no partitioning or inheritance (statement triggers
-- fire for the table a statement names only, not for its partitions, children or parents).
-- PL/pgSQL: its one query is planned once per session, where a SQL function with a SET clause
-- (never inlined) is planned again at every call, which cost six times the query (1.9 against
-- 0.3 ms): every read of the catalog calls it, as a query verified exactly does once a call.
CREATE FUNCTION {schema}.drift_v1(i {schema}.indexes)
RETURNS text LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $body$
BEGIN
RETURN (
SELECT CASE
    WHEN c.oid IS NULL THEN 'its table was dropped'
    WHEN restored AND kn.attnum OPERATOR(pg_catalog.<>) i.key_attnum
     AND kn.atttypid OPERATOR(pg_catalog.=) i.key_type_id
        THEN 'its key column ' || quote_ident(kn.attname) || ' is column ' || kn.attnum
            || ' now, not ' || i.key_attnum || ' (a restore from a dump numbers columns anew)'
    WHEN restored AND tn.attnum OPERATOR(pg_catalog.<>) i.text_attnum
     AND tn.atttypid OPERATOR(pg_catalog.=) i.text_type_id
        THEN 'its text column ' || quote_ident(tn.attname) || ' is column ' || tn.attnum
            || ' now, not ' || i.text_attnum || ' (a restore from a dump numbers columns anew)'
    WHEN k.attnum IS NULL THEN 'its key column was dropped'
    WHEN t.attnum IS NULL THEN 'its text column was dropped'
    WHEN k.atttypid OPERATOR(pg_catalog.<>) i.key_type_id
      OR k.atttypmod OPERATOR(pg_catalog.<>) i.key_typmod
        THEN 'its key column ' || quote_ident(k.attname) || ' changed type from '
            || format_type(i.key_type_id, i.key_typmod) || ' to '
            || format_type(k.atttypid, k.atttypmod)
    WHEN t.atttypid OPERATOR(pg_catalog.<>) i.text_type_id
        THEN 'its text column ' || quote_ident(t.attname) || ' changed type from '
            || format_type(i.text_type_id, NULL) || ' to ' || format_type(t.atttypid, NULL)
    WHEN c.relkind OPERATOR(pg_catalog.=) 'p'
        THEN 'its table is partitioned: writes straight into a partition bypass its triggers'
    WHEN h.parents IS NOT NULL
        THEN 'its table became a partition or inheritance child of ' || h.parents
            || ': writes through the parent bypass its triggers'
    WHEN h.children IS NOT NULL
        THEN 'its table has inheritance children (' || h.children
            || '), whose writes bypass its triggers'
    WHEN g.unfired IS NOT NULL
        THEN 'its triggers do not fire for ' || g.unfired || ': writes go unqueued'
END
FROM (VALUES (i.source::oid, i.source_oid IS DISTINCT FROM i.source::oid))
    AS s (relid, restored)
LEFT JOIN pg_catalog.pg_class AS c ON c.oid OPERATOR(pg_catalog.=) s.relid
LEFT JOIN pg_catalog.pg_attribute AS k
    ON k.attrelid OPERATOR(pg_catalog.=) c.oid AND k.attnum OPERATOR(pg_catalog.=) i.key_attnum
   AND NOT k.attisdropped
LEFT JOIN pg_catalog.pg_attribute AS t
    ON t.attrelid OPERATOR(pg_catalog.=) c.oid AND t.attnum OPERATOR(pg_catalog.=) i.text_attnum
   AND NOT t.attisdropped
LEFT JOIN pg_catalog.pg_attribute AS kn
    ON kn.attrelid OPERATOR(pg_catalog.=) c.oid AND kn.attname OPERATOR(pg_catalog.=) i.key_column
   AND kn.attnum OPERATOR(pg_catalog.>) 0 AND NOT kn.attisdropped
LEFT JOIN pg_catalog.pg_attribute AS tn
    ON tn.attrelid OPERATOR(pg_catalog.=) c.oid
   AND tn.attname OPERATOR(pg_catalog.=) i.text_column
   AND tn.attnum OPERATOR(pg_catalog.>) 0 AND NOT tn.attisdropped
LEFT JOIN LATERAL (
    SELECT (SELECT string_agg(x.inhparent::regclass::text, ', ')
            FROM pg_catalog.pg_inherits AS x WHERE x.inhrelid OPERATOR(pg_catalog.=) c.oid)
               AS parents,
           (SELECT string_agg(x.inhrelid::regclass::text, ', ')
            FROM pg_catalog.pg_inherits AS x WHERE x.inhparent OPERATOR(pg_catalog.=) c.oid)
               AS children
) AS h ON true
LEFT JOIN LATERAL (
    -- Each event's trigger (the function's own: by the function, whatever its name): a
    -- statement trigger enabled ALWAYS, and for the apply of logical replication (which fires
    -- row triggers only) a row trigger enabled in replica mode; the one so enabled first.
    -- tgtype's bits: 1 ROW, 4 INSERT, 8 DELETE, 16 UPDATE, 32 TRUNCATE.
    SELECT string_agg(e.event || CASE x.enabled WHEN 'D' THEN ' (disabled)'
                                                WHEN 'O' THEN ' (not in replica mode)'
                                                WHEN 'R' THEN ' (in replica mode only)'
                                                ELSE ' (dropped)' END,
                      ', ' ORDER BY e.per_row, e.bit) AS unfired
    FROM (VALUES ('INSERT', 4, 0, 'A'), ('DELETE', 8, 0, 'A'), ('UPDATE', 16, 0, 'A'),
                 ('TRUNCATE', 32, 0, 'A'), ('replicated INSERT', 4, 1, 'R'),
                 ('replicated DELETE', 8, 1, 'R'), ('replicated UPDATE', 16, 1, 'R'))
        AS e (event, bit, per_row, wanted)
    LEFT JOIN LATERAL (
        SELECT r.tgenabled::text AS enabled
        FROM pg_catalog.pg_trigger AS r
        JOIN pg_catalog.pg_proc AS p ON p.oid OPERATOR(pg_catalog.=) r.tgfoid
        WHERE r.tgrelid OPERATOR(pg_catalog.=) c.oid
          AND p.pronamespace OPERATOR(pg_catalog.=) (
                SELECT n.oid FROM pg_catalog.pg_namespace AS n
                WHERE n.nspname OPERATOR(pg_catalog.=) {schema_literal})
          AND p.proname OPERATOR(pg_catalog.=) (i.name || '_trigger_v1')
          AND (r.tgtype::integer OPERATOR(pg_catalog.&) e.bit) OPERATOR(pg_catalog.<>) 0
          AND (r.tgtype::integer OPERATOR(pg_catalog.&) 1) OPERATOR(pg_catalog.=) e.per_row
        ORDER BY r.tgenabled::text NOT IN (e.wanted, 'A')
        LIMIT 1
    ) AS x ON true
    WHERE x.enabled IS NULL OR x.enabled NOT IN (e.wanted, 'A')
) AS g ON true
);
END
$body$

-- name: source_changed_v1
-- Called by an index's trigger function (as the owner role) when the source does not look as
-- the catalog says: another table (refused), a table restored from a dump (its columns found
-- again by name: true, look again), or a key or text column changed or gone (the index is
-- marked, the write goes on). Catalog rows held by a build are left alone.
CREATE FUNCTION {schema}.source_changed_v1(index_name text, relid oid)
RETURNS boolean LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    entry {schema}.indexes;
    reason text;
BEGIN
    SELECT i.* INTO entry FROM {schema}.indexes AS i WHERE i.name = index_name;
    IF NOT FOUND THEN
        RETURN false;  -- dropped meanwhile
    END IF;
    IF entry.source IS NULL OR entry.source::oid OPERATOR(pg_catalog.<>) relid THEN
        RAISE EXCEPTION USING ERRCODE = '42501',
            MESSAGE = 'simindex: the triggers of index ' || quote_literal(index_name)
                || ' serve its source table only, not ' || relid::regclass::text;
    END IF;
    IF entry.state NOT IN ({live_states}) THEN
        RETURN false;
    END IF;
    IF entry.source_oid IS DISTINCT FROM relid THEN
        PERFORM {schema}.follow_source_v1(relid);
        RETURN true;
    END IF;
    reason := {schema}.drift_v1(entry);
    IF reason IS NULL THEN
        RETURN false;
    END IF;
    UPDATE {schema}.indexes AS i
    SET state = 'needs_rebuild', state_reason = reason, updated_at = now()
    WHERE i.id = (SELECT x.id FROM {schema}.indexes AS x WHERE x.name = index_name
                  FOR NO KEY UPDATE SKIP LOCKED);
    RETURN false;
END
$body$

-- name: within_distance_v1
-- Whether two stored SimHash fingerprints are within max_distance bits: the filter of a query
-- function's range scans. Made LEAKPROOF where a superuser migrates (leakproof_within; it
-- cannot fail, nor tell anything but its answer), so the planner applies it before the
-- row-level security probe of the source (simindex.db.answers): only rows within the distance
-- are probed, not every row of a prefix range. PL/pgSQL, so it is never inlined (the inlined
-- expression would not be leakproof). COST 8: the planner moves a leakproof qual ahead of the
-- policy's only when it costs less than 10 operators, and orders the quals of one level by
-- cost, so where no policy applies the query's inlined test of the same distance (5
-- operators, no call) runs first and this function only for the rows within it. No SET
-- clause (a GUC saved and restored per row would cost more than the test): every name in it
-- is qualified.
CREATE FUNCTION {schema}.within_distance_v1(a bigint, b bigint, max_distance integer)
RETURNS boolean LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE COST 8
AS $body$
BEGIN
    RETURN pg_catalog.bit_count((a OPERATOR(pg_catalog.#) b)::pg_catalog.bit(64))
        OPERATOR(pg_catalog.<=) max_distance;
END
$body$

-- name: minhash_similarity_v1
-- The Jaccard similarity two MinHash sketches estimate (simindex.core.packing): each of their
-- n one-bit values agrees with probability (1 + J) / 2, so J is 1 - 2 d / n from the number d
-- of differing bits, and no less than 0. The score of a MinHash query function's candidates,
-- LEAKPROOF where a superuser migrates, as within_distance_v1 and for the same reasons (it
-- never fails: a table's sketches and a query function's argument have one length).
CREATE FUNCTION {schema}.minhash_similarity_v1(a bit varying, b bit varying)
RETURNS double precision LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE COST 1
AS $body$
BEGIN
    -- OPERATOR() spellings share one precedence, left to right: the parentheses are needed.
    RETURN GREATEST(0.0::double precision, 1.0::double precision
        OPERATOR(pg_catalog.-) (2.0::double precision
        OPERATOR(pg_catalog.*) pg_catalog.bit_count(a OPERATOR(pg_catalog.#) b)
        OPERATOR(pg_catalog./) pg_catalog.length(a)));
END
$body$

-- name: minhash_pairs_of_table_v1
-- Every pair of a MinHash index's table (side) whose similarity reaches threshold, each once
-- (left < right): per band, the rows of equal band keys, scored only in the first band they
-- share (later bands skip pairs an earlier band key of which agrees); identical shingle sets
-- score 1. The self-join reads only keys and band keys, so its hash table stays small;
-- sketches are read for the candidate pairs alone. key_type: a NULL of the key's type.
CREATE FUNCTION {schema}.minhash_pairs_of_table_v1(
    side regclass, key_type anyelement, num_bands integer, threshold double precision
)
RETURNS TABLE (left_key anyelement, right_key anyelement, similarity double precision)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    band integer;
    earlier text := '';
BEGIN
    FOR band IN 0 .. num_bands - 1 LOOP
        RETURN QUERY EXECUTE format(
            'SELECT a.key, b.key, CASE WHEN a.set_hash = b.set_hash THEN 1.0::float8 '
            'ELSE %1$s(a.sketch, b.sketch) END FROM ('
            'SELECT x.key AS l, y.key AS r FROM %2$s AS x JOIN %2$s AS y '
            'ON y.%3$I = x.%3$I AND x.key OPERATOR(pg_catalog.<) y.key OFFSET 0) AS c '
            'JOIN %2$s AS a ON a.key OPERATOR(pg_catalog.=) c.l '
            'JOIN %2$s AS b ON b.key OPERATOR(pg_catalog.=) c.r '
            'WHERE (a.set_hash = b.set_hash OR %1$s(a.sketch, b.sketch) >= $1)%4$s',
            quote_ident({schema_literal}) || '.minhash_similarity_v1', side, 'b' || band,
            earlier)
        USING threshold;
        earlier := earlier || format(' AND a.%1$I <> b.%1$I', 'b' || band);
    END LOOP;
END
$body$

-- name: simhash_distance_v1
-- The Hamming distance of two stored SimHash fingerprints: the score of every SimHash query
-- and pairs function. SQL, IMMUTABLE and without a SET clause, so the planner inlines it into
-- the query that calls it (no call per row). The body is read where it is inlined, on the
-- caller's search_path: every name in it is qualified.
CREATE FUNCTION {schema}.simhash_distance_v1(a bigint, b bigint)
RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $body$
SELECT pg_catalog.bit_count((a OPERATOR(pg_catalog.#) b)::pg_catalog.bit(64))::integer
$body$

-- name: distance_allowed_v1
-- A query function's check of its max_distance argument against the index's k (highest):
-- true, or an error (22023). IMMUTABLE: the planner computes it once when both are constants.
-- No SET clause (a GUC saved and restored per call would cost more than the test): every name
-- in it is qualified.
CREATE FUNCTION {schema}.distance_allowed_v1(max_distance integer, highest integer)
RETURNS boolean LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $body$
BEGIN
    IF max_distance IS NULL OR max_distance OPERATOR(pg_catalog.<) 0
       OR max_distance OPERATOR(pg_catalog.>) highest THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = pg_catalog.concat('max_distance must be from 0 to ', highest, ', got ',
                                        coalesce(max_distance::text, '<NULL>'));
    END IF;
    RETURN true;
END
$body$

-- name: query_ready_v1
-- The guard of every SimHash query function, run once per call in the query's own snapshot (an
-- initplan of its plan, the one-time filter of its arms, after the plan took the side table's
-- lock): true, or an error. Its arguments are the query's own catalog lookups, in that
-- snapshot (simhash_query: in the plan, not statements of their own here).
-- A rebuild swaps new side tables in (DROP and RENAME, in its transaction). A query that meets
-- the swap waits for the table's lock; a statement that takes its snapshot after that wait (any
-- statement under READ COMMITTED, a VOLATILE function's too) sees the rebuilt table whole. One
-- whose snapshot is older (a REPEATABLE READ or SERIALIZABLE transaction, or a STABLE caller's
-- snapshot) would read the new table as empty: the side table it locked (the plan's constant,
-- by OID) is not the one the catalog row in its snapshot records (current is false), and it
-- fails as a serialization failure (40001), to be retried like one. An index whose source table was dropped (usable is false:
-- its catalog row says so, or its source's OID is gone) answers nothing (55000).
-- PARALLEL UNSAFE, so the query it guards is never planned parallel: a generic plan's
-- estimate of a prefix range (thousands of rows) makes workers look cheap, and starting them
-- costs a hundred times the query. No SET clause (a GUC saved and restored per call would cost
-- more than the test): every name in it is qualified.
CREATE FUNCTION {schema}.query_ready_v1(index_name text, current boolean, usable boolean)
RETURNS boolean LANGUAGE plpgsql STABLE PARALLEL UNSAFE
AS $body$
BEGIN
    IF NOT current THEN
        RAISE EXCEPTION USING ERRCODE = '40001',
            MESSAGE = pg_catalog.concat('simindex: index ', index_name,
                                        ' was rebuilt after this transaction''s snapshot was taken'),
            HINT = 'Run the transaction again.';
    END IF;
    IF NOT usable THEN
        RAISE EXCEPTION USING ERRCODE = '55000',
            MESSAGE = pg_catalog.concat('simindex: the source table of index ',
                                        pg_catalog.quote_literal(index_name),
                                        ' was dropped; drop the index'),
            HINT = pg_catalog.concat('simindex drop ', index_name);
    END IF;
    RETURN true;
END
$body$

-- name: leakproof_within
BEGIN
    IF (SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.rolname = current_user) THEN
        EXECUTE 'ALTER FUNCTION ' || quote_ident({schema_literal})
            || '.within_distance_v1(bigint, bigint, integer) LEAKPROOF';
        EXECUTE 'ALTER FUNCTION ' || quote_ident({schema_literal})
            || '.minhash_similarity_v1(bit varying, bit varying) LEAKPROOF';
    END IF;
END

-- name: share_index_v1
-- A sync batch's hold on its index (the catalog row FOR KEY SHARE until the transaction ends: no
-- build or drop of the index starts meanwhile), for the writer and worker rights, which may not
-- lock or update catalog rows themselves. False while a build or drop holds the row. Only for
-- a caller who may work that index (DELETE on its queue: the worker right) or index its own
-- writes to it (EXECUTE on its index_own function: the writer right), as record_health_v1
-- decides who the caller is: a hold is a wait for that index's builds and drops.
CREATE FUNCTION {schema}.share_index_v1(index_name text)
RETURNS boolean LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    caller text := pg_catalog.current_setting('role');
    queue regclass;
BEGIN
    IF caller = 'none' THEN
        caller := session_user;
    END IF;
    queue := pg_catalog.to_regclass(quote_ident({schema_literal}) || '.'
                                    || quote_ident(index_name || '_queue'));
    IF queue IS NULL THEN
        RETURN false;  -- no such index (or one being made): nothing to hold
    END IF;
    IF NOT pg_catalog.has_table_privilege(caller, queue, 'DELETE')
       AND NOT EXISTS (
           SELECT FROM pg_catalog.pg_proc AS p
           WHERE p.pronamespace OPERATOR(pg_catalog.=) (
                     SELECT n.oid FROM pg_catalog.pg_namespace AS n
                     WHERE n.nspname OPERATOR(pg_catalog.=) {schema_literal})
             AND p.proname OPERATOR(pg_catalog.=) (index_name || '_index_own_v1')::pg_catalog.name
             AND pg_catalog.has_function_privilege(caller, p.oid, 'EXECUTE')) THEN
        RAISE EXCEPTION USING ERRCODE = '42501',
            MESSAGE = 'simindex: role ' || quote_ident(caller) || ' has neither the worker nor '
                || 'the writer right on index ' || quote_literal(index_name),
            HINT = 'simindex grant ' || caller || ' --worker --index ' || index_name;
    END IF;
    PERFORM FROM {schema}.indexes AS i WHERE i.name OPERATOR(pg_catalog.=) index_name
    FOR KEY SHARE SKIP LOCKED;
    RETURN FOUND;
END
$body$

-- name: record_health_v1
-- The sync worker's record of an index's health, for roles with the worker right (EXECUTE is
-- theirs alone; they have no right to write the catalog): 'broken' (a batch failed as a
-- whole, error says why), 'row_error' (the latest failed row; the index stays healthy),
-- 'recovered' (a batch succeeded) or 'resolved' (no failed item is left: the last error of an
-- index that is not broken is forgotten). Catalog rows held by a build or drop are left alone
-- (SKIP LOCKED): the error is recorded at the next attempt.
-- The worker right is per index (simindex grant ROLE --worker --index NAME): the caller must
-- hold it on the index named, DELETE on its queue (which the reader and writer rights do not
-- give). The caller is the role that called this function: the session's role, or the one it
-- SET ROLE to (neither changes inside a SECURITY DEFINER function, where current_user is the
-- owner role).
CREATE FUNCTION {schema}.record_health_v1(index_name text, health text, error text)
RETURNS void LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    caller text := pg_catalog.current_setting('role');
    queue regclass;
BEGIN
    IF index_name IS NULL OR health IS NULL
       OR health NOT IN ('broken', 'row_error', 'recovered', 'resolved') THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'simindex: record_health_v1 takes an index name and one of broken, '
                || 'row_error, recovered, resolved';
    END IF;
    IF NOT EXISTS (SELECT FROM {schema}.indexes AS i WHERE i.name = index_name) THEN
        RETURN;  -- dropped meanwhile: nothing to record
    END IF;
    IF caller = 'none' THEN
        caller := session_user;
    END IF;
    queue := pg_catalog.to_regclass(quote_ident({schema_literal}) || '.'
                                    || quote_ident(index_name || '_queue'));
    IF queue IS NULL OR NOT pg_catalog.has_table_privilege(caller, queue, 'DELETE') THEN
        RAISE EXCEPTION USING ERRCODE = '42501',
            MESSAGE = 'simindex: role ' || quote_ident(caller) || ' lacks the worker right on '
                || 'index ' || quote_literal(index_name) || ', so may not record its health',
            HINT = 'simindex grant ' || caller || ' --worker --index ' || index_name;
    END IF;
    IF health = 'resolved' THEN
        UPDATE {schema}.indexes AS i SET last_error = NULL, last_error_at = NULL
        WHERE i.id = (SELECT x.id FROM {schema}.indexes AS x
                      WHERE x.name = index_name AND NOT x.broken
                        AND x.last_error IS NOT NULL
                      FOR NO KEY UPDATE SKIP LOCKED);
        RETURN;
    END IF;
    IF health = 'recovered' THEN
        UPDATE {schema}.indexes AS i SET broken = false
        WHERE i.id = (SELECT x.id FROM {schema}.indexes AS x
                      WHERE x.name = index_name AND x.broken
                      FOR NO KEY UPDATE SKIP LOCKED);
        RETURN;
    END IF;
    IF error IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'simindex: record_health_v1 needs the error of a ' || health || ' index';
    END IF;
    UPDATE {schema}.indexes AS i
    SET broken = i.broken OR health = 'broken',
        last_error = pg_catalog.left(error, 4000), last_error_at = pg_catalog.now()
    WHERE i.id = (SELECT x.id FROM {schema}.indexes AS x WHERE x.name = index_name
                  FOR NO KEY UPDATE SKIP LOCKED);
END
$body$

-- name: source_usable_v1
-- For the index query functions: an index whose source table was dropped answers no query.
CREATE FUNCTION {schema}.source_usable_v1(index_name text)
RETURNS boolean LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $body$
BEGIN
    IF EXISTS (
        SELECT FROM {schema}.indexes AS i
        WHERE i.name = index_name
          AND (i.state = 'source_dropped' OR NOT EXISTS (
              SELECT FROM pg_catalog.pg_class AS c
              WHERE c.oid OPERATOR(pg_catalog.=) i.source))
    ) THEN
        RAISE EXCEPTION USING ERRCODE = '55000',
            MESSAGE = 'simindex: the source table of index ' || quote_literal(index_name)
                || ' was dropped; drop the index',
            HINT = 'simindex drop ' || index_name;
    END IF;
    RETURN true;
END
$body$

-- name: follow_source_v1
-- Records drift of the source ``relid``: its current names, its columns' numbers after a
-- restore, and whatever else drift_v1 finds (needs_rebuild). Run by the event triggers and by
-- source_changed_v1, as the owner role.
CREATE FUNCTION {schema}.follow_source_v1(relid oid)
RETURNS void LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    found record;
    checking text;
BEGIN
    -- A restored table (see drift_v1): its columns found again by their recorded names and
    -- types (where none is, the number stands, and drift_v1 judges it); the OID recorded anew.
    UPDATE {schema}.indexes AS i
    SET key_attnum = coalesce((
            SELECT k.attnum FROM pg_catalog.pg_attribute AS k
            WHERE k.attrelid OPERATOR(pg_catalog.=) relid
              AND k.attname OPERATOR(pg_catalog.=) i.key_column
              AND k.atttypid OPERATOR(pg_catalog.=) i.key_type_id
              AND k.attnum OPERATOR(pg_catalog.>) 0 AND NOT k.attisdropped), i.key_attnum),
        text_attnum = coalesce((
            SELECT t.attnum FROM pg_catalog.pg_attribute AS t
            WHERE t.attrelid OPERATOR(pg_catalog.=) relid
              AND t.attname OPERATOR(pg_catalog.=) i.text_column
              AND t.atttypid OPERATOR(pg_catalog.=) i.text_type_id
              AND t.attnum OPERATOR(pg_catalog.>) 0 AND NOT t.attisdropped), i.text_attnum),
        source_oid = relid
    WHERE i.source::oid OPERATOR(pg_catalog.=) relid
      AND i.source_oid IS DISTINCT FROM relid
      AND i.id IN (SELECT x.id FROM {schema}.indexes AS x
                   WHERE x.source::oid OPERATOR(pg_catalog.=) relid
                   FOR NO KEY UPDATE SKIP LOCKED);
    UPDATE {schema}.indexes AS i
    SET source_schema = f.schema_name, source_table = f.table_name,
        key_column = coalesce(f.key_name, i.key_column),
        text_column = coalesce(f.text_name, i.text_column),
        state = CASE WHEN f.reason IS NOT NULL AND i.state IN ({live_states})
                     THEN 'needs_rebuild' ELSE i.state END,
        state_reason = CASE WHEN f.reason IS NOT NULL AND i.state IN ({live_states})
                            THEN f.reason ELSE i.state_reason END,
        updated_at = now()
    FROM (
        SELECT x.id, n.nspname AS schema_name, c.relname AS table_name,
               k.attname AS key_name, t.attname AS text_name,
               {schema}.drift_v1(x) AS reason
        FROM {schema}.indexes AS x
        JOIN pg_catalog.pg_class AS c ON c.oid OPERATOR(pg_catalog.=) x.source::oid
        JOIN pg_catalog.pg_namespace AS n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
        LEFT JOIN pg_catalog.pg_attribute AS k
            ON k.attrelid OPERATOR(pg_catalog.=) c.oid
           AND k.attnum OPERATOR(pg_catalog.=) x.key_attnum AND NOT k.attisdropped
        LEFT JOIN pg_catalog.pg_attribute AS t
            ON t.attrelid OPERATOR(pg_catalog.=) c.oid
           AND t.attnum OPERATOR(pg_catalog.=) x.text_attnum AND NOT t.attisdropped
        WHERE x.source::oid OPERATOR(pg_catalog.=) relid
    ) AS f
    WHERE i.id OPERATOR(pg_catalog.=) f.id
      AND i.id IN (SELECT x.id FROM {schema}.indexes AS x
                   WHERE x.source::oid OPERATOR(pg_catalog.=) relid
                   FOR NO KEY UPDATE SKIP LOCKED);
    -- Each index's probes of the source (simindex.db.answers, answers.sql) name the table and
    -- key column as they are now; their bodies are not checked (the owner role may not see them).
    checking := current_setting('check_function_bodies');
    FOR found IN
        SELECT x.name, c.oid::regclass::text AS relation, k.attname AS key_name,
               format_type(p.proargtypes[0], NULL) AS key_type
        FROM {schema}.indexes AS x
        JOIN pg_catalog.pg_class AS c ON c.oid OPERATOR(pg_catalog.=) x.source::oid
        JOIN pg_catalog.pg_attribute AS k
            ON k.attrelid OPERATOR(pg_catalog.=) c.oid
           AND k.attnum OPERATOR(pg_catalog.=) x.key_attnum AND NOT k.attisdropped
        JOIN pg_catalog.pg_proc AS p
            ON p.pronamespace OPERATOR(pg_catalog.=) (
                   SELECT n.oid FROM pg_catalog.pg_namespace AS n
                   WHERE n.nspname OPERATOR(pg_catalog.=) {schema_literal})
           AND p.proname OPERATOR(pg_catalog.=) (x.name || '_visible_v1')
           AND p.pronargs OPERATOR(pg_catalog.=) 1
        WHERE x.source::oid OPERATOR(pg_catalog.=) relid
    LOOP
        PERFORM set_config('check_function_bodies', 'off', true);
        EXECUTE 'CREATE OR REPLACE FUNCTION ' || quote_ident({schema_literal}) || '.'
            || quote_ident(found.name || '_visible_v1') || '(key ' || found.key_type
            || ') RETURNS boolean LANGUAGE plpgsql STABLE PARALLEL SAFE AS '
            || quote_literal('BEGIN RETURN EXISTS (SELECT FROM ' || found.relation
                             || ' AS s WHERE s.' || quote_ident(found.key_name)
                             || ' OPERATOR(pg_catalog.=) $1); END');
        EXECUTE 'CREATE OR REPLACE FUNCTION ' || quote_ident({schema_literal}) || '.'
            || quote_ident(found.name || '_visible_key_v1') || '(key ' || found.key_type
            || ') RETURNS SETOF ' || found.key_type || ' LANGUAGE sql STABLE PARALLEL SAFE AS '
            || quote_literal('SELECT s.' || quote_ident(found.key_name) || ' FROM '
                             || found.relation || ' AS s WHERE s.' || quote_ident(found.key_name)
                             || ' OPERATOR(pg_catalog.=) $1');
        PERFORM set_config('check_function_bodies', checking, true);
    END LOOP;
END
$body$

-- name: distrust_v1
-- An index's trigger function written for its table as it was (its literal marked
-- "/* simindex_trusted */" true: it reads the columns unchecked, because these event triggers
-- watch every change of the table) made to check them again, after a change of the table; a build writes it afresh. CREATE OR REPLACE
-- keeps the function's owner, its rights and its triggers.
CREATE FUNCTION {schema}.distrust_v1(index_name text)
RETURNS void LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    fn record;
BEGIN
    SELECT p.oid::regprocedure::text AS routine, p.prosrc INTO fn
    FROM pg_catalog.pg_proc AS p
    WHERE p.pronamespace OPERATOR(pg_catalog.=) (
            SELECT n.oid FROM pg_catalog.pg_namespace AS n WHERE n.nspname = {schema_literal})
      AND p.proname = index_name || '_trigger_v1';
    IF NOT FOUND OR strpos(fn.prosrc, '/* simindex_trusted */ true') = 0 THEN
        RETURN;
    END IF;
    EXECUTE 'CREATE OR REPLACE FUNCTION ' || fn.routine || ' RETURNS trigger '
        || 'LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS '
        || quote_literal(pg_catalog.replace(fn.prosrc,
               '/* simindex_trusted */ true', '/* simindex_trusted */ false'));
END
$body$

-- name: on_sql_drop_v1
-- The event trigger functions: SECURITY DEFINER as the owner role (they write the catalog
-- whoever runs the DDL), and never the reason the app's DDL fails: an error becomes a warning.
CREATE FUNCTION {schema}.on_sql_drop_v1()
RETURNS event_trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    entry record;
BEGIN
    -- A column of a source dropped (by DROP TYPE ... CASCADE, say): its trigger function
    -- checks its columns again. Not caught: no write may run a trusted body on a changed table.
    FOR entry IN
        SELECT DISTINCT i.name FROM {schema}.indexes AS i
        JOIN pg_catalog.pg_event_trigger_dropped_objects() AS d
          ON d.objid OPERATOR(pg_catalog.=) i.source::oid
        WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::regclass
          AND d.object_type = 'table column'
    LOOP
        PERFORM {schema}.distrust_v1(entry.name);
    END LOOP;
    BEGIN
        -- A trigger dropped (DROP TRIGGER, or its function dropped): the indexes whose
        -- triggers no longer all fire are marked (drift_v1 finds which).
        IF EXISTS (SELECT FROM pg_catalog.pg_event_trigger_dropped_objects() AS d
                   WHERE d.object_type = 'trigger') THEN
            FOR entry IN
                SELECT DISTINCT i.source::oid AS relid FROM {schema}.indexes AS i
                WHERE i.state IN ({live_states}) AND {schema}.drift_v1(i) IS NOT NULL
            LOOP
                PERFORM {schema}.follow_source_v1(entry.relid);
            END LOOP;
        END IF;
        UPDATE {schema}.indexes AS i
        SET state = 'source_dropped',
            state_reason = 'its table ' || d.object_identity || ' was dropped',
            updated_at = now()
        FROM pg_catalog.pg_event_trigger_dropped_objects() AS d
        WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::regclass
          AND d.objsubid OPERATOR(pg_catalog.=) 0 AND d.object_type = 'table'
          AND d.objid OPERATOR(pg_catalog.=) i.source::oid
          AND i.id IN (SELECT x.id FROM {schema}.indexes AS x
                       WHERE x.state <> 'source_dropped'
                       FOR NO KEY UPDATE SKIP LOCKED);
        UPDATE {schema}.indexes AS i
        SET state = 'needs_rebuild',
            state_reason = 'its column ' || d.object_identity || ' was dropped',
            updated_at = now()
        FROM pg_catalog.pg_event_trigger_dropped_objects() AS d
        WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::regclass
          AND d.object_type = 'table column'
          AND d.objid OPERATOR(pg_catalog.=) i.source::oid
          AND d.objsubid IN (i.key_attnum, i.text_attnum)
          AND i.id IN (SELECT x.id FROM {schema}.indexes AS x
                       WHERE x.state IN ({live_states})
                       FOR NO KEY UPDATE SKIP LOCKED);
    EXCEPTION WHEN OTHERS THEN
        RAISE WARNING USING MESSAGE = 'simindex: could not record a dropped source: ' || SQLERRM;
    END;
END
$body$

-- name: on_alter_table_v1
CREATE FUNCTION {schema}.on_alter_table_v1()
RETURNS event_trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    entry record;
BEGIN
    -- The indexes of every table the command changed, whatever its tag: the tables altered
    -- (ALTER TABLE, or ALTER VIEW / MATERIALIZED VIEW / FOREIGN TABLE run on a table), those
    -- whose row type was (ALTER TYPE of a typed table's type), their children (a change of a
    -- parent reaches them) and their parents (a table made, or made to inherit, a child of a
    -- source: drift_v1 marks the source, whose triggers do not see the child's writes).
    FOR entry IN
        WITH RECURSIVE changed (relid) AS (
            SELECT d.objid FROM pg_catalog.pg_event_trigger_ddl_commands() AS d
            WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::regclass
            UNION
            -- ALTER TYPE of a composite type names its pg_class entry (relkind c).
            SELECT c.oid FROM pg_catalog.pg_event_trigger_ddl_commands() AS d
            JOIN pg_catalog.pg_class AS t ON t.oid OPERATOR(pg_catalog.=) d.objid
            JOIN pg_catalog.pg_class AS c ON c.reloftype OPERATOR(pg_catalog.=) t.reltype
            WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::regclass
              AND t.relkind OPERATOR(pg_catalog.=) 'c'  -- an index's reltype is 0, as untyped tables' reloftype
            UNION
            SELECT CASE WHEN h.inhparent OPERATOR(pg_catalog.=) x.relid THEN h.inhrelid
                        ELSE h.inhparent END
            FROM pg_catalog.pg_inherits AS h
            JOIN changed AS x ON x.relid IN (h.inhparent, h.inhrelid)
        )
        SELECT DISTINCT i.name, i.source::oid AS relid FROM {schema}.indexes AS i
        JOIN changed AS x ON x.relid OPERATOR(pg_catalog.=) i.source::oid
    LOOP
        -- Not caught: no write may run a trusted body on a changed table.
        PERFORM {schema}.distrust_v1(entry.name);
        BEGIN
            PERFORM {schema}.follow_source_v1(entry.relid);
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING USING MESSAGE = 'simindex: could not follow a changed source: '
                || SQLERRM;
        END;
    END LOOP;
END
$body$

-- name: event_triggers
-- Event triggers are per database and need a superuser; without them drift is found when an
-- index is next used (see the README's Security section).
BEGIN
    IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.rolname = current_user) THEN
        RAISE NOTICE USING MESSAGE = 'simindex: not a superuser, so no event triggers: a '
            || 'dropped or changed source table is noticed when its index is next used';
        RETURN;
    END IF;
    EXECUTE 'CREATE EVENT TRIGGER ' || quote_ident({sql_drop}) || ' ON sql_drop '
        || 'EXECUTE FUNCTION ' || quote_ident({schema_literal}) || '.on_sql_drop_v1()';
    -- Every command tag: PostgreSQL renames a table's columns under ALTER VIEW, ALTER
    -- MATERIALIZED VIEW and ALTER FOREIGN TABLE too, and a tag list would miss the next such
    -- spelling (CREATE TABLE ... PARTITION OF / INHERITS makes a child of a source). The
    -- function looks only at commands that touched a pg_class entry.
    EXECUTE 'CREATE EVENT TRIGGER ' || quote_ident({alter_table}) || ' ON ddl_command_end '
        || 'EXECUTE FUNCTION ' || quote_ident({schema_literal}) || '.on_alter_table_v1()';
END

-- name: drop_indexes
-- Every index goes: the tables and functions in the schema that this migration did not make
-- (its own functions are listed below), with their triggers (CASCADE), then the catalog rows.
DECLARE
    found record;
BEGIN
    FOR found IN
        SELECT p.oid::regprocedure AS routine FROM pg_catalog.pg_proc AS p
        WHERE p.pronamespace = (SELECT n.oid FROM pg_catalog.pg_namespace AS n
                                WHERE n.nspname = {schema_literal})
          AND p.proname NOT IN ({functions})
    LOOP
        EXECUTE 'DROP ROUTINE IF EXISTS ' || found.routine::text || ' CASCADE';
    END LOOP;
    FOR found IN
        SELECT c.oid::regclass AS relation FROM pg_catalog.pg_class AS c
        WHERE c.relnamespace = (SELECT n.oid FROM pg_catalog.pg_namespace AS n
                                WHERE n.nspname = {schema_literal})
          AND c.relkind IN ('r', 'p') AND c.relname NOT IN ('indexes', 'alembic_version')
    LOOP
        EXECUTE 'DROP TABLE IF EXISTS ' || found.relation::text || ' CASCADE';
    END LOOP;
    DELETE FROM {schema}.indexes;
END
