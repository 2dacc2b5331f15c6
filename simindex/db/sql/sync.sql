-- name: sync_create_queue
-- Keys whose index rows must be recomputed from the source row as it is when a worker reads it.
-- One entry per key: a key changed twice before a worker comes is processed once.
CREATE TABLE {queue} (
    key {key_type} PRIMARY KEY,
    queued_at timestamptz NOT NULL DEFAULT now()
)

-- name: sync_create_failed
-- Keys a worker could not process, with the last error; they stay out of the queue's way until
-- a retry (or a later change of the row) succeeds.
CREATE TABLE {failed} (
    key {key_type} PRIMARY KEY,
    error text NOT NULL,
    attempts integer NOT NULL DEFAULT 1,
    failed_at timestamptz NOT NULL DEFAULT now()
)

-- name: sync_insert_function
-- The trigger functions run as their owner (SECURITY DEFINER), so an app role that may write
-- the source table needs no rights on simindex's schema; the pinned search_path and qualified
-- names keep that safe. Enqueueing uses DO UPDATE ... WHERE false, not DO NOTHING: it changes
-- nothing but locks an entry that already exists, so no worker can consume that entry (and read
-- the source before this transaction commits) until the writer is done. A writer that finds the
-- entry being consumed waits for that worker, then queues the key afresh.
CREATE FUNCTION {function}() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
BEGIN
    INSERT INTO {queue} AS q (key)
    SELECT n.{key} FROM new_rows AS n WHERE n.{key} IS NOT NULL
    ON CONFLICT (key) DO UPDATE SET queued_at = q.queued_at WHERE false;
    PERFORM pg_notify({channel}, '');
    RETURN NULL;
END
$body$

-- name: sync_update_function
-- Per row, but the trigger's WHEN clause skips updates that change neither text nor key
-- without calling the function at all. A changed key queues both keys: the old one is deleted.
CREATE FUNCTION {function}() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
BEGIN
    INSERT INTO {queue} AS q (key)
    SELECT DISTINCT k FROM (VALUES (NEW.{key}), (OLD.{key})) AS v (k) WHERE k IS NOT NULL
    ON CONFLICT (key) DO UPDATE SET queued_at = q.queued_at WHERE false;
    PERFORM pg_notify({channel}, '');
    RETURN NULL;
END
$body$

-- name: sync_delete_function
-- Index rows go at once. The keys are queued too (first, so a writer only ever waits for a
-- worker, never the other way round): a worker that read a row just before its delete
-- committed may write it back, and its entry makes the next worker remove it again.
{create} {function}() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
BEGIN
    INSERT INTO {queue} AS q (key)
    SELECT o.{key} FROM old_rows AS o WHERE o.{key} IS NOT NULL
    ON CONFLICT (key) DO UPDATE SET queued_at = q.queued_at WHERE false;
    {delete_side_rows};
    PERFORM pg_notify({channel}, '');
    RETURN NULL;
END
$body$

-- name: sync_delete_side_rows
DELETE FROM {table} AS s USING old_rows AS o WHERE s.key = o.{key}

-- name: sync_truncate_function
-- The queue and the failed items stay: their keys no longer exist, so a worker deletes nothing
-- for them. (Truncating them here could deadlock with a worker holding their rows.)
{create} {function}() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
BEGIN
    TRUNCATE {tables};
    RETURN NULL;
END
$body$

-- name: sync_insert_trigger
CREATE TRIGGER {trigger} AFTER INSERT ON {source}
REFERENCING NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION {function}()

-- name: sync_update_trigger
CREATE TRIGGER {trigger} AFTER UPDATE OF {text}, {key} ON {source}
FOR EACH ROW
WHEN (OLD.{text}::text IS DISTINCT FROM NEW.{text}::text OR OLD.{key} IS DISTINCT FROM NEW.{key})
EXECUTE FUNCTION {function}()

-- name: sync_delete_trigger
CREATE TRIGGER {trigger} AFTER DELETE ON {source}
REFERENCING OLD TABLE AS old_rows
FOR EACH STATEMENT EXECUTE FUNCTION {function}()

-- name: sync_truncate_trigger
CREATE TRIGGER {trigger} AFTER TRUNCATE ON {source}
FOR EACH STATEMENT EXECUTE FUNCTION {function}()

-- name: sync_drop_trigger
DROP TRIGGER IF EXISTS {trigger} ON {source}

-- name: sync_trigger_names
-- The triggers simindex installed on a table (for tests and for drop).
SELECT t.tgname FROM pg_catalog.pg_trigger AS t
WHERE t.tgrelid = %(table)s::regclass AND NOT t.tgisinternal AND t.tgname LIKE 'simindex\_%%'
ORDER BY t.tgname

-- name: sync_listen
LISTEN {channel}

-- name: sync_catalog_share
-- Held for a batch: a build (which swaps the side tables) or a drop waits for the batch, and a
-- batch skips an index that is being built or dropped instead of waiting for it.
SELECT source_schema, source_table, key_column, key_type, text_column, spec::text, clustering,
       broken
FROM {catalog} WHERE name = %(name)s
FOR KEY SHARE SKIP LOCKED

-- name: sync_catalog_exists
SELECT 1 FROM {catalog} WHERE name = %(name)s

-- name: sync_take
-- A batch of entries, deleted now and gone for good when the batch commits; if the worker
-- dies first, its transaction rolls back and they are queued again. The rows are found again
-- by ctid (a TID scan; they are locked, so they cannot move): matching on the key would let
-- the planner hash-join the whole queue for every batch. The source is read by the next
-- statement, not in this one, so its snapshot is taken after these locks: a writer whose
-- trigger held an entry until it committed is seen.
DELETE FROM {queue} WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM {queue} LIMIT %(limit)s FOR UPDATE SKIP LOCKED
))
RETURNING key

-- name: sync_take_keys
-- Given entries (the SQLAlchemy session's own, which it holds locked already).
DELETE FROM {queue} WHERE key = ANY(%(keys)s::{key_type}[]) RETURNING key

-- name: sync_requeue
INSERT INTO {queue} AS q (key) SELECT unnest(%(keys)s::{key_type}[])
ON CONFLICT (key) DO UPDATE SET queued_at = q.queued_at WHERE false

-- name: sync_requeue_failed
-- Failed items stay recorded until they succeed; re-queueing them lets the ordinary path take
-- them, one worker per key.
INSERT INTO {queue} AS q (key) SELECT f.key FROM {failed} AS f
ON CONFLICT (key) DO UPDATE SET queued_at = q.queued_at WHERE false

-- name: sync_read
-- The current rows; a text over the size limit is not sent at all.
SELECT {key},
       CASE WHEN octet_length({text}::text) <= %(max_bytes)s THEN {text}::text END,
       octet_length({text}::text)
FROM {source}
WHERE {key} = ANY(%(keys)s::{key_type}[])

-- name: sync_fail
INSERT INTO {failed} AS f (key, error) VALUES (%(key)s, %(error)s)
ON CONFLICT (key) DO UPDATE
SET error = EXCLUDED.error, attempts = f.attempts + 1, failed_at = now()

-- name: sync_forget_failed
DELETE FROM {failed} WHERE key = ANY(%(keys)s::{key_type}[])

-- name: sync_counts
SELECT (SELECT count(*) FROM {queue}), (SELECT count(*) FROM {failed})

-- name: sync_failed_items
SELECT key, error, attempts, failed_at FROM {failed} ORDER BY key
