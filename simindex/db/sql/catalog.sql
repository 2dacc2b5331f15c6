-- name: catalog_insert
-- Values as literals: the same statement runs from Python and goes into an Alembic --sql script.
INSERT INTO {catalog} (name, source_schema, source_table, key_column, key_type, text_column,
                       method, spec, spec_version)
VALUES ({name}, {source_schema}, {source_table}, {key_column}, {key_type}, {text_column},
        {method}, {spec}::jsonb, {spec_version})

-- name: catalog_get
SELECT name, source_schema, source_table, key_column, key_type, text_column, spec::text, state,
       row_count, skipped_count, created_at, updated_at, built_at, broken, last_error,
       last_error_at
FROM {catalog} WHERE name = %(name)s

-- name: catalog_lock
-- Serialises builds and drops of one index.
SELECT 1 FROM {catalog} WHERE name = {name} FOR UPDATE

-- name: catalog_list
SELECT name FROM {catalog} ORDER BY name

-- name: catalog_set_state
UPDATE {catalog} SET state = %(state)s, updated_at = now() WHERE name = %(name)s

-- name: catalog_built
UPDATE {catalog}
SET state = 'ready', row_count = %(row_count)s, skipped_count = %(skipped_count)s,
    built_at = now(), updated_at = now()
WHERE name = %(name)s

-- name: catalog_set_spec
-- A build that chose a new design or storage format records it with the rows it wrote.
UPDATE {catalog} SET spec = %(spec)s::jsonb, spec_version = %(spec_version)s WHERE name = %(name)s

-- name: catalog_delete
DELETE FROM {catalog} WHERE name = {name}

-- name: catalog_table_bytes
-- Disk use of an index's tables, indexes and TOAST included.
SELECT c.relname, pg_catalog.pg_total_relation_size(c.oid)
FROM unnest(%(tables)s::text[]) WITH ORDINALITY AS t (qualified, n)
JOIN pg_catalog.pg_class AS c ON c.oid = pg_catalog.to_regclass(t.qualified)
ORDER BY t.n

-- name: catalog_broken
-- The sync worker's record of an index whose batch failed as a whole. SKIP LOCKED: a build or
-- drop holding the row must not stall the worker; the error is recorded at the next attempt.
UPDATE {catalog} SET broken = true, last_error = %(error)s, last_error_at = now()
WHERE id = (SELECT id FROM {catalog} WHERE name = %(name)s FOR NO KEY UPDATE SKIP LOCKED)

-- name: catalog_row_error
-- The latest error of a failed row, for stats; the index itself stays healthy.
UPDATE {catalog} SET last_error = %(error)s, last_error_at = now()
WHERE id = (SELECT id FROM {catalog} WHERE name = %(name)s FOR NO KEY UPDATE SKIP LOCKED)

-- name: catalog_recovered
UPDATE {catalog} SET broken = false WHERE name = %(name)s AND broken
