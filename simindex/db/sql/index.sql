-- name: catalog_token
-- What an Index checks before using the catalog entry it keeps: the row's identity and
-- version. Any change of the row (build, state, drop and create again) changes one of them.
-- Every name schema-qualified: a query by key sends it unpinned, on the caller's search_path.
SELECT id, xmin::pg_catalog.text FROM {catalog} WHERE name OPERATOR(pg_catalog.=) %(name)s

-- name: key_state
-- Why a key is not in the index: still queued (not synced yet), set aside as failed, the index
-- broken; asked only once a query found the key not indexed (facade_by_key, or exact
-- verification). The inbox has no index: it is scanned, and only for a key not indexed.
-- Every name schema-qualified, as in facade_by_key: it may go out on a caller's search_path.
SELECT EXISTS (SELECT 1 FROM {queue} WHERE key OPERATOR(pg_catalog.=) %(key)s)
       OR EXISTS (SELECT 1 FROM {inbox} WHERE key OPERATOR(pg_catalog.=) %(key)s),
       (SELECT error FROM {failed} WHERE key OPERATOR(pg_catalog.=) %(key)s),
       (SELECT CASE WHEN broken THEN coalesce(last_error, '') END
        FROM {catalog} WHERE name OPERATOR(pg_catalog.=) %(name)s)

-- name: build_lock_queue
-- The entries of the queue, or of the inbox, no one holds now. One a writer holds (the writer
-- right's, until its commit) or a worker's move is taking is skipped; a worker's move skips
-- the inbox entries locked here, and a writer that comes later waits for the build to commit.
SELECT ctid FROM {queue} FOR UPDATE SKIP LOCKED

-- name: build_read
-- The build's read: a server-side cursor over the key, in its text form (concat calls the
-- type's output function, never a cast, and it round-trips in this session: COPY reads it back, and psycopg need not load
-- values it cannot, such as dates past 9999 or 'infinity'), the text up to %(inline)s bytes
-- (a longer one is read alone, build_read_one), the row's version (build_row_version, for
-- build_dequeue; NULL when no key is queued, which spares every row its text) and ctid, and
-- the text's size (which octet_length takes from the stored datum without reading it).
SELECT pg_catalog.concat({key}),
       CASE WHEN pg_catalog.octet_length({text}::text) <= %(inline)s THEN {text} END,
       {version}, ctid,
       pg_catalog.octet_length({text}::text)
FROM ONLY {table}

-- name: build_row_version (a row's version as build_dequeue compares it: table, tuple, xmin)
pg_catalog.concat_ws('/', tableoid, ctid, xmin)

-- name: build_read_one
-- A long text: of the row version build_read saw, by its ctid; when the row changed since, as
-- it is now (its version is then not the one build_dequeue compares, so a queued entry stays);
-- none when it was deleted since (the delete queued it). The key, in its text form, is read
-- back by its type's input function.
(SELECT {text} FROM ONLY {table} WHERE ctid OPERATOR(pg_catalog.=) %(ctid)s::pg_catalog.tid)
UNION ALL
(SELECT {text} FROM ONLY {table} WHERE {key} OPERATOR(pg_catalog.=) %(key)s::{key_type})
LIMIT 1

-- name: build_queued_keys
-- The keys queued before the build's read, in their text form (the type's output function,
-- never a cast: a cast to text could be the key type owner's function): the rows whose
-- version the read keeps for build_dequeue. The queue's and the inbox's.
(SELECT pg_catalog.concat(key) FROM {queue} LIMIT %(limit)s)
UNION ALL
(SELECT pg_catalog.concat(key) FROM {inbox} LIMIT %(limit)s)

-- name: build_dequeue
-- Of the entries locked by build_lock_queue, the ones whose source row is now, exactly, a row
-- version the build read: same table, same tuple (ctid) and same inserting xid (xmin). Any
-- write since the read made a new version (a new ctid), so an entry whose row changed, was
-- deleted, or was written by a transaction the read could not see stays queued. No snapshot
-- arithmetic: an xid of a subtransaction is in no snapshot's list, so a visibility test on
-- xmin is wrong for rows written under a SAVEPOINT. Run as a statement of its own, after the
-- locks, so its own snapshot sees every writer that committed before them. For the queue and
-- the inbox alike.
DELETE FROM {queue} AS q
USING ONLY {source} AS s
WHERE q.ctid OPERATOR(pg_catalog.=) ANY(%(locked)s::pg_catalog.tid[])
  AND s.ctid OPERATOR(pg_catalog.=) ANY(%(ctids)s::pg_catalog.tid[])
  AND pg_catalog.concat_ws('/', s.tableoid, s.ctid, s.xmin)
      OPERATOR(pg_catalog.=) ANY(%(versions)s::pg_catalog.text[])
  AND s.{key} OPERATOR(pg_catalog.=) q.key

-- name: build_lock_timeout
-- A build's swap waits this long at a time for its locks, so that no query queues behind it
-- for longer; the setting before, for build_lock_timeout_restore.
SELECT pg_catalog.current_setting('lock_timeout'),
       pg_catalog.set_config('lock_timeout', %(timeout)s, true)

-- name: build_lock_timeout_restore
SELECT pg_catalog.set_config('lock_timeout', %(previous)s, true)

-- name: build_swap_lock
-- The live tables the swap drops: taken before it, in a savepoint the build retries.
LOCK TABLE {tables} IN ACCESS EXCLUSIVE MODE

-- name: build_has_owner_rights
-- Whether the caller acts with the owner role's privileges (a member that inherits them, or a
-- superuser): it may then COPY into the staging tables as itself, without a SET ROLE while its
-- read cursor is open.
SELECT pg_catalog.pg_has_role(current_user, %(owner)s, 'USAGE')

-- name: build_isolation
SELECT pg_catalog.current_setting('transaction_isolation')

-- name: source_columns_of_keys
-- Columns of the source rows with these keys, to show beside them.
SELECT {key}, {columns} FROM ONLY {table} WHERE {key} OPERATOR(pg_catalog.=) ANY(%(keys)s)

-- name: source_columns_check
SELECT {columns} FROM {table} LIMIT 0

-- name: facade_by_key
-- A query by key and the check of the facade's kept catalog entry, in one round trip. The
-- answer's rows come first, as the query function returns them (already in its order: it
-- sorts before its max_rows; a function's rows are read back in the order it returned them,
-- and UNION ALL appends its branches in order), with NULLs beside them; then one row with a
-- NULL key (keys are NOT NULL) of the catalog row's id and xmin and whether the key is in the
-- index (through the side table's row-level security, a probe of the source): rows of two
-- columns and one of the entry, no sort, no copy of the check on every row. Why a key is not
-- in the index (queued, a failed item, the index broken: key_state) is asked only then, by a
-- second statement: the relations it reads would be opened by every query's plan, used or not.
-- When the index was dropped meanwhile this statement fails: in autocommit only, so that the
-- facade can start again from the catalog. Every name is schema-qualified (the casts' types,
-- the operators; the query functions set their own path): the facade sends it on a caller's
-- connection as it is, on the caller's search_path, without the two round trips of a pin and
-- its restore. The query first: the key parameter takes its type from the function's argument
-- (the source key's type), as it would alone, before the comparison below uses it.
SELECT q.key, q.{measure}, NULL::pg_catalog.int4, NULL::pg_catalog.text, NULL::pg_catalog.bool
FROM {function}(%(key)s, %(bound)s, %(limit)s::pg_catalog.int4) AS q
UNION ALL
SELECT NULL, NULL, c.id, c.xmin::pg_catalog.text,
       EXISTS (SELECT 1 FROM {table} AS t WHERE t.key OPERATOR(pg_catalog.=) %(key)s)
FROM {catalog} AS c
WHERE c.name OPERATOR(pg_catalog.=) %(name)s

-- name: facade_checked
-- A query by text or fingerprint and the check of the facade's kept catalog entry, in one round
-- trip: the catalog row's id and xmin beside each row of the answer (a row of NULLs when there
-- is none). When the index was dropped meanwhile this statement fails: it is sent in autocommit
-- only. Every name is schema-qualified, as in facade_by_key.
SELECT c.id, c.xmin::pg_catalog.text, q.*
FROM {catalog} AS c
LEFT JOIN LATERAL ({query}) AS q ON true
WHERE c.name OPERATOR(pg_catalog.=) %(name)s
ORDER BY {order}
