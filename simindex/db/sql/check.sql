-- name: check_simhash_rows
-- Each source row (or a sample) beside what the index holds for it, read with a server-side
-- cursor in the same snapshot as the orphan query.
SELECT s.{key}, s.{text}::text, i.fingerprint, {stored_columns}
FROM ONLY {source} AS s {sample}
LEFT JOIN {table} AS i ON i.key OPERATOR(pg_catalog.=) s.{key}

-- name: check_orphans
-- Index rows (or a sample) whose source row is gone.
SELECT DISTINCT i.key FROM {table} AS i {sample}
WHERE NOT EXISTS (SELECT FROM ONLY {source} AS s WHERE s.{key} OPERATOR(pg_catalog.=) i.key)

-- name: check_sample
TABLESAMPLE BERNOULLI ({percent})

-- name: check_snapshot
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY
