-- Statements of the in-transaction path for SQLAlchemy sessions (simindex.sqlalchemy).

-- name: session_catalog_exists
SELECT to_regclass(%(catalog)s) IS NOT NULL

-- name: session_wrote
-- Whether this transaction has written anything (it has a transaction id only then).
SELECT pg_current_xact_id_if_assigned() IS NOT NULL

-- name: session_own_keys
-- The keys this transaction queued, in their text form: its inbox entries, those whose xmin is
-- this transaction or one of its subtransactions (SAVEPOINT), written while it ran (see
-- session_index_own_function, which checks each key again). The triggers append an entry for
-- every key they queue, so every key this transaction changed has one.
-- An xmin is 32 bits: widened to xid8 as our own id plus its distance ahead of it (modulo
-- 2^32; a subtransaction's id comes after its parent's, and an entry more than 2^31 ids ahead
-- is not ours), then its status looked up: a visible entry written by a transaction in
-- progress is ours, since another's uncommitted entry is invisible; a later transaction's
-- committed entry is 'committed'. (The snapshot's xmax bounds nothing here: our own
-- subtransactions' ids come after it.) Under REPEATABLE READ the snapshot is the
-- transaction's, older than its subtransactions, so entries queued inside a savepoint there
-- are left to the worker. No lock: no other transaction sees an entry this one wrote.
SELECT DISTINCT pg_catalog.concat(q.key)
FROM {inbox} AS q,
LATERAL (SELECT pg_current_xact_id_if_assigned()::text::bigint AS own_id) AS o,
LATERAL (
    SELECT pg_catalog.mod(q.xmin::text::bigint - pg_catalog.mod(o.own_id, 4294967296)
                          + 4294967296, 4294967296) AS ahead
) AS d
WHERE q.xmin::text::bigint >= 3
  AND d.ahead < 2147483648
  AND pg_xact_status((o.own_id + d.ahead)::text::xid8) = 'in progress'

-- name: session_has_own_keys
-- Whether this transaction queued an entry of this index (see session_own_keys).
SELECT 1
FROM {inbox} AS q,
LATERAL (SELECT pg_current_xact_id_if_assigned()::text::bigint AS own_id) AS o,
LATERAL (
    SELECT pg_catalog.mod(q.xmin::text::bigint - pg_catalog.mod(o.own_id, 4294967296)
                          + 4294967296, 4294967296) AS ahead
) AS d
WHERE q.xmin::text::bigint >= 3
  AND d.ahead < 2147483648
  AND pg_xact_status((o.own_id + d.ahead)::text::xid8) = 'in progress'
LIMIT 1

-- name: session_index_own_function
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
CREATE OR REPLACE FUNCTION {function}(remove {key_type}[], written jsonb, failures jsonb)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    own_id bigint := pg_current_xact_id_if_assigned()::text::bigint;
    done {key_type}[];
    failed_keys {key_type}[];
    every_key {key_type}[];
BEGIN
    SELECT coalesce(array_agg(w.key), '{{}}') INTO done
    FROM jsonb_populate_recordset(NULL::{table}, coalesce(written, '[]')) AS w;
    SELECT coalesce(array_agg(f.key), '{{}}') INTO failed_keys
    FROM jsonb_to_recordset(coalesce(failures, '[]')) AS f (key {key_type}, error text);
    every_key := coalesce(remove, '{{}}') || done || failed_keys;
    IF cardinality(every_key) = 0 THEN
        RETURN 0;
    END IF;
    IF array_position(every_key, NULL) IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'simindex: a key is NULL';
    END IF;
    IF own_id IS NULL OR EXISTS (
        WITH own AS (
            SELECT q.key FROM {inbox} AS q,
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
    INSERT INTO {queue} AS q (key)
    SELECT DISTINCT k.key FROM unnest(every_key) AS k (key) ORDER BY k.key
    ON CONFLICT (key) DO UPDATE SET queued_at = q.queued_at;
    DELETE FROM {table} AS t
    WHERE t.key OPERATOR(pg_catalog.=) ANY(coalesce(remove, '{{}}') || done);
    INSERT INTO {table}
    SELECT * FROM jsonb_populate_recordset(NULL::{table}, coalesce(written, '[]'));
    INSERT INTO {failed} AS f (key, error)
    SELECT x.key, x.error
    FROM jsonb_to_recordset(coalesce(failures, '[]')) AS x (key {key_type}, error text)
    ON CONFLICT (key) DO UPDATE
    SET error = EXCLUDED.error, attempts = f.attempts + 1, failed_at = now();
    DELETE FROM {failed} AS f
    WHERE f.key OPERATOR(pg_catalog.=) ANY(coalesce(remove, '{{}}') || done)
      AND NOT f.key OPERATOR(pg_catalog.=) ANY(failed_keys);
    DELETE FROM {queue} AS q WHERE q.key OPERATOR(pg_catalog.=) ANY(every_key);
    -- Under READ COMMITTED, the entries other transactions appended for these keys too (they
    -- committed before this one wrote the rows: what it writes is newer), but those a move is
    -- taking; under REPEATABLE READ or SERIALIZABLE its own only (locking one a move took
    -- since the snapshot would fail to serialize).
    DELETE FROM {inbox} WHERE ctid = ANY(ARRAY(
        SELECT q.ctid FROM {inbox} AS q
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
REVOKE ALL ON FUNCTION {function} FROM PUBLIC

-- name: session_index_own
SELECT {function}(%(remove)s::{key_type}[], %(written)s, %(failures)s)

-- name: session_drop_own_function
-- By its name alone: the key type's schema may be out of the owner role's reach by now.
DROP FUNCTION IF EXISTS {function}

-- name: session_grant_own_function
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
                WHERE r.rolname OPERATOR(pg_catalog.=) {owner})
          AND d.defaclnamespace OPERATOR(pg_catalog.=) (
                SELECT n.oid FROM pg_catalog.pg_namespace AS n
                WHERE n.nspname OPERATOR(pg_catalog.=) {schema})
          AND a.grantee OPERATOR(pg_catalog.<>) 0
          AND pg_catalog.has_function_privilege(a.grantee, {share}::pg_catalog.regprocedure,
                                                'EXECUTE')
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I',
                                  {function}::pg_catalog.regprocedure,
                                  pg_catalog.pg_get_userbyid(found.grantee));
    END LOOP;
END
$body$
