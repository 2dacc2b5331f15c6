-- name: drop_table
DROP TABLE IF EXISTS {table}

-- name: rename_table
ALTER TABLE {table} RENAME TO {name}

-- name: rename_index
ALTER INDEX {index} RENAME TO {name}

-- name: analyze
ANALYZE {table}

-- name: vacuum_analyze
VACUUM (ANALYZE) {table}

-- name: drop_function
DROP FUNCTION IF EXISTS {function}

-- name: table_bytes
SELECT pg_catalog.pg_total_relation_size(%(table)s::regclass)

-- name: synchronous_commit_local
SET LOCAL synchronous_commit = on

