-- name: drop_table
DROP TABLE IF EXISTS {table}

-- name: rename_table
ALTER TABLE {table} RENAME TO {name}

-- name: rename_index
ALTER INDEX {index} RENAME TO {name}

-- name: add_primary_key
-- A staging table's primary key, built once its rows are loaded (named as it would have been).
ALTER TABLE {table} ADD PRIMARY KEY (key)

-- name: analyze
ANALYZE {table}

-- name: vacuum
-- After a build commits: the visibility map only (the build analysed its tables already).
VACUUM {table}

-- name: drop_function
DROP FUNCTION IF EXISTS {function}

-- name: table_bytes
SELECT pg_catalog.pg_total_relation_size(%(table)s::regclass)

-- name: synchronous_commit_local
SET LOCAL synchronous_commit = on


-- name: query_swap_guard
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
    SELECT FROM pg_catalog.pg_class AS c WHERE c.oid = pg_catalog.to_regclass({table_name})
) OR (SELECT true FROM {table} LIMIT 0)
INTO simindex_current;
IF simindex_current IS NOT TRUE THEN
    IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION USING ERRCODE = '40001',
            MESSAGE = 'simindex: index ' || {index_name}
                || ' was rebuilt after this transaction''s snapshot was taken',
            HINT = 'Run the transaction again.';
    END IF;
    RETURN QUERY SELECT * FROM {function}({arguments});
    RETURN;
END IF


-- name: query_checks
-- A query function's checks (simhash_query, minhash_key_query), one scalar
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
                WHEN i.side::pg_catalog.oid OPERATOR(pg_catalog.=) {side_oid}
                     AND i.state OPERATOR(pg_catalog.<>) 'source_dropped'
                     AND pg_catalog.pg_table_is_visible(i.source::pg_catalog.oid) IS NOT NULL
                THEN true
                ELSE {ready}(
                    {index_name},
                    i.side::pg_catalog.oid OPERATOR(pg_catalog.=) {side_oid},
                    i.state OPERATOR(pg_catalog.<>) 'source_dropped'
                        AND pg_catalog.pg_table_is_visible(i.source::pg_catalog.oid) IS NOT NULL)
                END
            FROM {catalog} AS i WHERE i.name OPERATOR(pg_catalog.=) {index_name}),
           {ready}({index_name}, false, true)))
