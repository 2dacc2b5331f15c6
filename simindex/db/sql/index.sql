-- name: catalog_token
-- What an Index checks before using the catalog entry it keeps: the row's identity and
-- version. Any change of the row (build, state, drop and create again) changes one of them.
SELECT id, xmin::text FROM {catalog} WHERE name = %(name)s

-- name: key_state
-- Why a key is not in the index: still queued (not synced yet), or set aside as failed.
SELECT EXISTS (SELECT 1 FROM {queue} WHERE key OPERATOR(pg_catalog.=) %(key)s),
       (SELECT error FROM {failed} WHERE key OPERATOR(pg_catalog.=) %(key)s)

-- name: build_lock_queue
-- The queue entries no writer holds now. A writer that holds one (its trigger queued the key
-- and it has not committed) is skipped; one that comes later waits for the build to commit.
SELECT ctid FROM {queue} FOR UPDATE SKIP LOCKED

-- name: build_dequeue
-- Of the entries locked by build_lock_queue, the ones the build has read as they are: the
-- source row's current version was committed before the build's snapshot (taken before its
-- read). Run as a statement of its own, after the locks, so its own snapshot sees every
-- writer that committed before them. An xid is made 64-bit against the newest one (it cannot
-- be newer): a row version the snapshot cannot see stays queued. Keys with no source row stay
-- queued too: a row deleted during the build is removed from the swapped-in index by sync.
DELETE FROM {queue} AS q
USING ONLY {source} AS s
WHERE q.ctid = ANY(%(ctids)s::tid[])
  AND s.{key} OPERATOR(pg_catalog.=) q.key
  AND pg_catalog.pg_visible_in_snapshot(
        ((pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot())::text::bigint
          - ((pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot())::text::bigint
              - s.xmin::text::bigint) & 4294967295)))::text::xid8,
        %(snapshot)s::pg_snapshot)

-- name: build_snapshot
SELECT pg_catalog.pg_current_snapshot()::text, pg_catalog.current_setting('transaction_isolation')

-- name: catalog_token_and_key
-- catalog_token, and whether a key is in the index, in one round trip (the table is the one
-- the entry being checked names; a dropped index fails here, in autocommit only).
SELECT id, xmin::text, EXISTS (SELECT 1 FROM {table} WHERE key OPERATOR(pg_catalog.=) %(key)s)
FROM {catalog} WHERE name = %(name)s

-- name: source_columns_of_keys
-- Columns of the source rows with these keys, to show beside them.
SELECT {key}, {columns} FROM ONLY {table} WHERE {key} OPERATOR(pg_catalog.=) ANY(%(keys)s)

-- name: source_columns_check
SELECT {columns} FROM {table} LIMIT 0

-- name: facade_by_key
-- A query by key, the check of the facade's kept catalog entry and whether the key is indexed,
-- in one round trip. Autocommit only: when the index was dropped meanwhile this statement
-- fails, and the facade starts again from the catalog.
SELECT c.id, c.xmin::text,
       EXISTS (SELECT 1 FROM {table} AS t WHERE t.key OPERATOR(pg_catalog.=) %(key)s), q.*
FROM {catalog} AS c LEFT JOIN LATERAL ({query}) AS q ON true
WHERE c.name = %(name)s
ORDER BY {order}

-- name: sync_unlisten
UNLISTEN *
