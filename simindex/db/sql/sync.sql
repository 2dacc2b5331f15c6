-- name: sync_create_queue
-- Keys whose index rows must be recomputed from the source row as it is when a worker reads it.
-- One entry per key: a key changed twice before a worker comes is processed once. The workers'
-- coordination: the triggers append to the inbox, and a worker moves what committed there into
-- this table (sync_move) before it takes a batch from it (sync_take).
CREATE TABLE {queue} (
    key {key_type} PRIMARY KEY,
    queued_at timestamptz NOT NULL DEFAULT now()
)

-- name: sync_create_inbox
-- The keys the app's statements changed, as their triggers append them: no index, no
-- constraint, one row per key a statement queued (a key changed twice is there twice), so a
-- write costs the app one plain append and never waits for a worker or another writer. What
-- only the keyed queue gives (one worker per key, in order) is the workers' business: they
-- move entries from here into it (sync_move). Entries a transaction has not committed are
-- invisible to the workers, so none reads a source row before its writer committed.
CREATE TABLE {inbox} (
    key {key_type},
    queued_at timestamptz NOT NULL DEFAULT now()
)

-- name: sync_create_deletes
-- That deletes happened: one row per DELETE statement on the source, no key (the statement
-- trigger has no transition table). The worker consumes them and removes the index rows whose
-- source row is gone (sync_sweep_rows).
CREATE TABLE {deletes} (
    deleted_at timestamptz NOT NULL DEFAULT now()
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

-- name: sync_trigger_function
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
CREATE OR REPLACE FUNCTION {function}() RETURNS trigger
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
    IF /* simindex_trusted */ {trusted} AND TG_RELID OPERATOR(pg_catalog.=) {relid}
       AND TG_LEVEL = 'STATEMENT' AND TG_WHEN = 'AFTER'
       AND pg_catalog.current_setting('session_replication_role') <> 'replica' THEN
        IF TG_OP = 'INSERT' THEN
            {fast_insert};
        ELSIF TG_OP = 'UPDATE' THEN
            {fast_update};
        ELSIF TG_OP = 'DELETE' THEN
            {fast_delete};
        ELSE
            {truncate};
        END IF;
        RETURN NULL;
    END IF;
    replica := pg_catalog.current_setting('session_replication_role') = 'replica';
    IF TG_WHEN <> 'AFTER' OR (TG_LEVEL <> 'STATEMENT' AND NOT replica) THEN
        RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = 'simindex: ' || TG_NAME
            || ' must be an AFTER ... FOR EACH STATEMENT trigger of index ' || {index_name};
    END IF;
    IF TG_LEVEL = 'ROW' THEN
        -- The key column as recorded (number and type), read by its name of now.
        SELECT a.attname INTO key_name
        FROM {catalog} AS i
        JOIN pg_catalog.pg_attribute AS a
          ON a.attrelid = i.source AND a.attnum = i.key_attnum AND a.atttypid = i.key_type_id
         AND a.atttypmod = i.key_typmod AND NOT a.attisdropped
        WHERE i.name = {index_name} AND i.source = TG_RELID
          AND i.state IN ('created', 'building', 'ready', 'failed');
        IF key_name IS NULL THEN
            PERFORM {source_changed}({index_name}, TG_RELID);
            RETURN NULL;
        END IF;
        IF TG_OP <> 'DELETE' THEN
            EXECUTE pg_catalog.format({queue_row}, key_name) USING NEW;
        END IF;
        IF TG_OP <> 'INSERT' THEN
            EXECUTE pg_catalog.format({queue_row}, key_name) USING OLD;
        END IF;
        RETURN NULL;
    END IF;
    IF replica AND TG_OP <> 'TRUNCATE' THEN
        RETURN NULL;  -- queued by the row triggers
    END IF;
    IF TG_RELID = {relid} THEN
        IF /* simindex_trusted */ {trusted} OR TG_OP IN ('TRUNCATE', 'DELETE') THEN
            written_for := true;
        ELSE
            SELECT true INTO written_for FROM pg_catalog.pg_attribute AS a
            WHERE a.attrelid = TG_RELID AND a.attnum = {key_attnum} AND a.attname = {key_name}
              AND a.atttypid = {key_type_id} AND a.atttypmod = {key_typmod}
              AND NOT a.attisdropped;
            IF written_for AND TG_OP = 'UPDATE' THEN
                SELECT true INTO written_for FROM pg_catalog.pg_attribute AS a
                WHERE a.attrelid = TG_RELID AND a.attnum = {text_attnum}
                  AND a.attname = {text_name} AND a.atttypid = {text_type_id}
                  AND NOT a.attisdropped;
            END IF;
        END IF;
    END IF;
    IF written_for THEN
        CASE TG_OP
            WHEN 'INSERT' THEN
                {insert};
            WHEN 'UPDATE' THEN
                {update};
            WHEN 'DELETE' THEN
                {delete};
            WHEN 'TRUNCATE' THEN
                {truncate};
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
            FROM {catalog} AS i
            JOIN pg_catalog.pg_attribute AS a
              ON a.attrelid = i.source AND a.attnum > 0
             AND a.attnum <= greatest(i.key_attnum, i.text_attnum) AND NOT a.attisdropped
            WHERE i.name = {index_name} AND i.source = TG_RELID
              AND i.state IN ('created', 'building', 'ready', 'failed');
            EXIT WHEN source.as_recorded IS TRUE
                   OR NOT {source_changed}({index_name}, TG_RELID);
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
                {dynamic_insert};
            WHEN 'UPDATE' THEN
                {dynamic_update};
            WHEN 'DELETE' THEN
                {dynamic_delete};
            WHEN 'TRUNCATE' THEN
                {truncate};
        END CASE;
    END IF;
    RETURN NULL;
END
$body$

-- name: sync_trigger_fast_queue
-- The keys queued and whether the index rows of the new keys must go (deletes recorded, or a
-- snapshot that may predate one: see sync_trigger_if_deleted), in one statement.
WITH queued AS (
{queue}
)
SELECT EXISTS (SELECT FROM {deletes})
       OR pg_catalog.current_setting('transaction_isolation') <> 'read committed'
INTO deleted

-- name: sync_trigger_fast_replace
-- After sync_trigger_fast_queue: as sync_trigger_if_deleted, the keys queued already.
IF deleted THEN
    IF pg_catalog.current_setting('transaction_isolation') = 'read committed' THEN
        {wait};
    ELSE
        BEGIN
            {wait};
        EXCEPTION WHEN serialization_failure THEN
            NULL;  -- an entry a batch consumed since this snapshot: the batch is done
        END;
    END IF;
    {statement};
END IF

-- name: sync_trigger_fast_delete
-- That a delete happened.
INSERT INTO {deletes} (deleted_at) VALUES (pg_catalog.now())

-- name: sync_trigger_queue_row
-- A row's key ($1, the row; the key column's name goes where the mark is), for format().
INSERT INTO {inbox} (key) SELECT ($1).{column} WHERE ($1).{column} IS NOT NULL

-- name: sync_trigger_insert
INSERT INTO {inbox} (key)
SELECT n.{key} FROM new_rows AS n{aliases} WHERE n.{key} IS NOT NULL

-- name: sync_trigger_update
-- One pass (a hash full join on the key): new keys whose text differs from their old row's,
-- new keys without an old row and old keys without a new row (a key that changed).
INSERT INTO {inbox} (key)
SELECT coalesce(n.{key}, o.{key})
FROM new_rows AS n{aliases}
FULL JOIN old_rows AS o{aliases} ON o.{key} OPERATOR({equals}) n.{key}
WHERE coalesce(n.{key}, o.{key}) IS NOT NULL
  AND (n.{key} IS NULL OR o.{key} IS NULL
       OR (o.{text}::text COLLATE pg_catalog."C")
          IS DISTINCT FROM (n.{text}::text COLLATE pg_catalog."C"))

-- name: sync_trigger_delete
INSERT INTO {deletes} DEFAULT VALUES

-- name: sync_trigger_if_deleted
-- The keys queued; then a key used again keeps nothing of its deleted row (see the function's
-- comment): the batches holding its entry waited for, then its index rows removed. Under READ
-- COMMITTED the append and the look for recorded deletes are one statement (queue_checked):
-- a one-row write pays for one statement, not two.
IF pg_catalog.current_setting('transaction_isolation') = 'read committed' THEN
    {queue_checked};
    IF deleted THEN
        {wait};
        {statement};
    END IF;
ELSE
    {queue};
    BEGIN
        {wait};
    EXCEPTION WHEN serialization_failure THEN
        NULL;  -- an entry a batch consumed since this snapshot: the batch is done
    END;
    {statement};
END IF

-- name: sync_trigger_queue_checked
-- The append, and whether deletes are recorded (into the function's variable "deleted").
WITH queued AS (
{queue}
)
SELECT EXISTS (SELECT FROM {deletes}){into}

-- name: sync_trigger_dynamic_into
EXECUTE pg_catalog.format({statement}, aliases) INTO deleted

-- name: sync_trigger_insert_wait
-- PERFORM, or SELECT in a statement run with EXECUTE (its rows discarded).
{perform} FROM {queue} AS q
WHERE q.key OPERATOR({equals}) ANY (ARRAY(SELECT n.{key} FROM new_rows AS n{aliases}))
FOR KEY SHARE

-- name: sync_trigger_update_wait
-- The new keys without an old row, as sync_trigger_update_replaced finds them.
{perform} FROM {queue} AS q
WHERE q.key OPERATOR({equals}) ANY (ARRAY(
    SELECT n.{key} FROM new_rows AS n{aliases}
    WHERE NOT EXISTS (SELECT FROM old_rows AS o{aliases} WHERE o.{key} OPERATOR({equals}) n.{key})
))
FOR KEY SHARE

-- name: sync_trigger_insert_replaced
DELETE FROM {table} AS s USING new_rows AS n{aliases} WHERE s.key OPERATOR({equals}) n.{key}

-- name: sync_trigger_update_replaced
-- New keys without an old row (a key changed), found first (usually none: no index probe).
DELETE FROM {table} AS s
WHERE s.key OPERATOR({equals}) ANY (ARRAY(
    SELECT n.{key} FROM new_rows AS n{aliases}
    WHERE NOT EXISTS (SELECT FROM old_rows AS o{aliases} WHERE o.{key} OPERATOR({equals}) n.{key})
))

-- name: sync_trigger_truncate
TRUNCATE {tables}

-- name: sync_trigger_dynamic
EXECUTE pg_catalog.format({statement}, aliases)

-- name: sync_event_triggers_on
-- Whether simindex's two event triggers watch this database (enabled, for ordinary sessions,
-- and the one following changes of a table for every command tag).
SELECT count(*) = 2
FROM pg_catalog.pg_event_trigger AS e
JOIN pg_catalog.pg_proc AS p ON p.oid = e.evtfoid
JOIN pg_catalog.pg_namespace AS n ON n.oid = p.pronamespace
WHERE n.nspname = %(schema)s AND p.proname IN ('on_sql_drop_v1', 'on_alter_table_v1')
  AND e.evtenabled IN ('O', 'A')
  AND (p.proname = 'on_sql_drop_v1' OR e.evttags IS NULL)

-- name: sync_build_lock
-- Taken by a build before it reads the source: no sweep runs meanwhile (sync_sweep_begin),
-- and one in flight finishes first.
SELECT pg_catalog.pg_advisory_xact_lock(%(class)s, %(key)s)

-- name: sync_batch_lock
-- Taken (shared) by every batch before it reads the source, until it commits: a sweep waits
-- for the batches in flight, which may have read a row before it was deleted and write its
-- index rows back, and its statements see what they wrote.
SELECT pg_catalog.pg_advisory_xact_lock_shared(%(class)s, %(key)s)

-- name: sync_deletes_due
-- Seconds until the oldest recorded delete is %(delay)s seconds old (0 or less: a sweep is due);
-- NULL when none is recorded. The table holds one row per DELETE statement since the last sweep.
SELECT (EXTRACT(epoch FROM min(deleted_at) - now()) + %(delay)s)::float8 FROM {deletes}

-- name: sync_sweep_begin
-- A sweep's locks, for its transaction: none while a build holds its lock (the build's
-- snapshot may hold rows deleted since; its tables are swept once it committed), then the
-- batches' lock, exclusively (see sync_batch_lock). False: a build runs, nothing is swept.
SELECT pg_catalog.pg_try_advisory_xact_lock_shared(%(build_class)s, %(key)s)
       AND pg_catalog.pg_advisory_xact_lock(%(class)s, %(key)s) IS NOT NULL

-- name: sync_take_deletes
-- Every delete recorded so far. The next statement's snapshot, taken after, sees them all.
DELETE FROM {deletes}

-- name: sync_sweep_rows
-- The index rows whose source row is gone: an anti-join over the side table.
DELETE FROM {table} AS s
WHERE NOT EXISTS (
    SELECT FROM ONLY {source} AS t WHERE t.{key} OPERATOR(pg_catalog.=) s.key
)

-- name: sync_revoke_function
REVOKE ALL ON FUNCTION {function}() FROM PUBLIC

-- name: sync_check_equality
-- Fails here, not in a trigger, when the key's type has no such = operator, or one a full
-- join cannot use (random() keeps the join from being planned away).
SELECT FROM {queue} AS a FULL JOIN {queue} AS b ON a.key OPERATOR({equals}) b.key
WHERE pg_catalog.random() < 0

-- name: sync_create_trigger
CREATE TRIGGER {trigger} AFTER {event} ON {source}
{transition_tables}
FOR EACH STATEMENT EXECUTE FUNCTION {function}()

-- name: sync_create_row_trigger
CREATE TRIGGER {trigger} AFTER {event} ON {source}
FOR EACH ROW EXECUTE FUNCTION {function}()

-- name: sync_enable_always
-- The statement triggers fire whatever session_replication_role says, the row triggers in
-- replica mode only: rows a logical replication subscription applies, and writes of a session
-- set to replica, are queued too. (Only the table's owner may do this; CREATE TRIGGER alone
-- makes a trigger of origin and local mode.)
ALTER TABLE {source} {enable}

-- name: sync_drop_trigger_function
-- With its triggers, wherever the source table is now (or whatever its name): CASCADE.
DROP FUNCTION IF EXISTS {function}() CASCADE

-- name: sync_pending
-- Whether a following worker has work: entries in an inbox or a queue, or deletes recorded
-- (the tests, EXISTS over each table, joined by OR). Seeing a row costs a look at the first
-- page that holds one; the worker runs this every poll_interval while it waits.
SELECT {tests}

-- name: sync_catalog_exists
SELECT 1 FROM {catalog} WHERE name = %(name)s

-- name: sync_move
-- Up to %(limit)s entries of the inbox into the queue, in a transaction of its own committed
-- before the batch that takes from the queue (sync_take). Only committed writers' entries are
-- visible here, and the batch's read of the source, later, sees what they wrote. An entry a
-- batch holds (taken and not committed) makes the insert of its key wait for that batch, then
-- queue the key afresh: a batch that takes it next reads the source after the first one wrote,
-- so per key, index rows are written in the order of the source's versions. A key queued
-- already is left as it is (DO NOTHING; no batch holds it), and the entries of one key in the
-- inbox are one entry here. The inserts go in key order, so that two moves wait for each other
-- at most one way; a move waits for no writer (the triggers' locks on entries are locks
-- alone, sync_trigger_wait, and a writer's own entries are in the inbox until it commits) but
-- for one of the writer right's transactions consuming its own keys (session_index_own_function),
-- which holds them only until its commit. Inbox rows another move holds are skipped. (A sync
-- on a caller's Connection moves in a savepoint of the caller's transaction, uncommitted: a
-- writer using a deleted key again does not see, so does not wait for, what it moved.)
WITH moved AS (
    DELETE FROM {inbox} WHERE ctid = ANY(ARRAY(
        SELECT ctid FROM {inbox} LIMIT %(limit)s FOR UPDATE SKIP LOCKED
    ))
    RETURNING key, queued_at
)
INSERT INTO {queue} AS q (key, queued_at)
SELECT m.key, pg_catalog.min(m.queued_at) FROM moved AS m GROUP BY m.key ORDER BY m.key
ON CONFLICT (key) DO NOTHING

-- name: sync_take
-- Keys come back in their text form (concat: the type's output function): every key PostgreSQL can
-- store, even one psycopg cannot load (a date 'infinity', a year past 9999, '24:00'), goes
-- through the batch and back in by the type's input function (pg_array.key_array).
-- A batch of entries, deleted now and gone for good when the batch commits; if the worker
-- dies first, its transaction rolls back and they are queued again. The rows are found again
-- by ctid (a TID scan; they are locked, so they cannot move): matching on the key would let
-- the planner hash-join the whole queue for every batch. The source is read by the next
-- statement, not in this one, so its snapshot is taken after these locks: every entry here
-- was committed by a move after its writer committed (sync_move), and a writer right's
-- transaction that held an entry until it committed (session_index_own_function) is seen.
DELETE FROM {queue} WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM {queue} LIMIT %(limit)s FOR UPDATE SKIP LOCKED
))
RETURNING pg_catalog.concat(key)

-- name: sync_take_keys
-- Given entries (of single entries the server cancelled: the worker's own, taken already).
DELETE FROM {queue} WHERE key OPERATOR(pg_catalog.=) ANY(%(keys)s::{key_type}[])
RETURNING pg_catalog.concat(key)

-- name: sync_requeue
INSERT INTO {queue} AS q (key) SELECT unnest(%(keys)s::{key_type}[])
ON CONFLICT (key) DO UPDATE SET queued_at = q.queued_at WHERE false

-- name: sync_requeue_failed
-- Failed items stay recorded until they succeed; re-queueing them lets the ordinary path take
-- them, one worker per key.
INSERT INTO {queue} AS q (key) SELECT f.key FROM {failed} AS f
ON CONFLICT (key) DO UPDATE SET queued_at = q.queued_at WHERE false

-- name: sync_read
-- The current rows. A text is sent while the batch's texts so far (in ctid order, a running
-- sum of their sizes, which octet_length takes from the stored datum without reading it) stay
-- within %(budget)s bytes; later ones, and any over %(max_bytes)s, come as NULL with their
-- size: the worker reads those afterwards in groups within the budget, or alone (its memory
-- stays bounded by bytes, not rows).
-- The text by its type's own cast to text (describe() admits built-in ones only; the types
-- were checked again under the table lock).
SELECT pg_catalog.concat(s.k),
       CASE WHEN s.size <= %(max_bytes)s AND s.running <= %(budget)s THEN s.t END,
       s.size
FROM (
    SELECT {key} AS k, {text}::text AS t, pg_catalog.octet_length({text}::text) AS size,
           pg_catalog.sum(pg_catalog.octet_length({text}::text))
               OVER (ORDER BY ctid ROWS UNBOUNDED PRECEDING) AS running
    FROM ONLY {source}
    WHERE {key} OPERATOR(pg_catalog.=) ANY(%(keys)s::{key_type}[])
) AS s

-- name: sync_fail
INSERT INTO {failed} AS f (key, error) VALUES (%(key)s, %(error)s)
ON CONFLICT (key) DO UPDATE
SET error = EXCLUDED.error, attempts = f.attempts + 1, failed_at = now()

-- name: sync_forget_failed
DELETE FROM {failed} WHERE key OPERATOR(pg_catalog.=) ANY(%(keys)s::{key_type}[])

-- name: sync_counts
-- Queue entries, the inbox's counted with them (a key appended twice there counts twice).
SELECT (SELECT count(*) FROM {queue}) + (SELECT count(*) FROM {inbox}),
       (SELECT count(*) FROM {failed})

-- name: sync_failed_items
SELECT key, error, attempts, failed_at FROM {failed} ORDER BY key

-- name: sync_read_committed
-- First in each batch's transaction, whatever the role's or database's default: every
-- statement of a batch must see what committed before it (the source read after the entries
-- were taken sees the writers that held them; see sync_take).
SET TRANSACTION ISOLATION LEVEL READ COMMITTED

-- name: sync_isolation
SELECT pg_catalog.current_setting('transaction_isolation')
