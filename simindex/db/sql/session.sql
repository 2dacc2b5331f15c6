-- Statements of the in-transaction path for SQLAlchemy sessions (simindex.sqlalchemy).

-- name: session_catalog_exists
SELECT to_regclass(%(catalog)s) IS NOT NULL

-- name: session_wrote
-- Whether this transaction has written anything (it has a transaction id only then).
SELECT pg_current_xact_id_if_assigned() IS NOT NULL

-- name: session_own_keys
-- The entries this transaction queued or locked, held for it. The triggers insert an entry, or
-- lock one that was already queued (DO UPDATE ... WHERE false), so an entry is ours when its
-- xmin or xmax is a transaction still in progress that holds no lock against us: another
-- transaction's uncommitted entries are invisible here, and its locks are skipped. A
-- subtransaction (SAVEPOINT) has its own id, hence the status lookup rather than an equality.
-- Ids are 32-bit in the row; they are widened to xid8 against the snapshot's next id, and only
-- ids at or after our own transaction's are looked up (our subtransactions come after it).
-- Under REPEATABLE READ the snapshot is the transaction's, older than its subtransactions, so
-- entries queued inside a savepoint there are left to the worker.
WITH own AS (
    SELECT pg_current_xact_id_if_assigned()::text::bigint AS own_id
), ids AS (
    SELECT own.own_id,
           greatest(pg_snapshot_xmax(pg_current_snapshot())::text::bigint, own.own_id + 1)
               AS next_id
    FROM own
)
SELECT q.key
FROM {queue} AS q, ids
WHERE EXISTS (
    SELECT 1
    FROM (VALUES (q.xmin::text::bigint), (q.xmax::text::bigint)) AS v (raw),
    LATERAL (
        SELECT (ids.next_id >> 32 << 32) + v.raw
               - CASE WHEN v.raw >= (ids.next_id & 4294967295) THEN 4294967296 ELSE 0 END
    ) AS x (full_id)
    WHERE v.raw >= 3
      AND x.full_id >= ids.own_id
      AND x.full_id < ids.next_id
      AND pg_xact_status(x.full_id::text::xid8) = 'in progress'
)
FOR UPDATE OF q SKIP LOCKED
