-- name: catalog_insert
-- Values as literals: the same statement runs from Python and goes into an Alembic --sql script.
-- The source's OID, column numbers and types are looked up when the statement runs (an offline
-- script knows only names; catalog_source_oid found the table by its name, with the caller's
-- rights); no row is inserted unless they all resolve.
INSERT INTO {catalog} (name, source_schema, source_table, key_column, key_type, text_column,
                       method, spec, spec_version, source, source_oid, key_attnum,
                       key_type_id, key_typmod, text_attnum, text_type_id)
SELECT {name}, n.nspname, c.relname, k.attname, {key_type}, t.attname,
       {method}, {spec}::jsonb, {spec_version}, c.oid, c.oid, k.attnum, k.atttypid, k.atttypmod,
       t.attnum, t.atttypid
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_attribute AS k
  ON k.attrelid = c.oid AND k.attname = {key_column} AND k.attnum > 0 AND NOT k.attisdropped
JOIN pg_catalog.pg_attribute AS t
  ON t.attrelid = c.oid AND t.attname = {text_column} AND t.attnum > 0 AND NOT t.attisdropped
WHERE c.oid = pg_catalog.current_setting('simindex.source')::pg_catalog.oid

-- name: catalog_source_oid
-- The table a new index is made for, found by name by the caller (simindex's owner role may
-- not look into the app's schemas), for catalog_insert.
SELECT pg_catalog.set_config('simindex.source', {table}::regclass::oid::text, true)

-- name: catalog_get
-- An index with its source as it is now: current names (renames are followed by OID and column
-- number) and, while its state is a live one, the state its source's drift implies. A column
-- found under its recorded name at another number (renumbered, as by a restore from a dump:
-- drift_v1 says so) goes by that name, which a build finds it by.
SELECT i.name,
       coalesce(n.nspname, i.source_schema), coalesce(c.relname, i.source_table),
       CASE WHEN i.source_oid IS DISTINCT FROM c.oid AND kn.attnum <> i.key_attnum
                 AND kn.atttypid = i.key_type_id THEN kn.attname
            ELSE coalesce(k.attname, i.key_column) END,
       i.key_type,
       CASE WHEN i.source_oid IS DISTINCT FROM c.oid AND tn.attnum <> i.text_attnum
                 AND tn.atttypid = i.text_type_id THEN tn.attname
            ELSE coalesce(t.attname, i.text_column) END,
       i.spec::text,
       CASE WHEN i.state NOT IN ('created', 'building', 'ready', 'failed') OR d.drift IS NULL
            THEN i.state
            WHEN c.oid IS NULL THEN 'source_dropped'
            ELSE 'needs_rebuild' END,
       i.row_count, i.skipped_count, i.created_at, i.updated_at, i.built_at,
       CASE WHEN i.state NOT IN ('created', 'building', 'ready', 'failed') OR d.drift IS NULL
            THEN i.state_reason ELSE d.drift END,
       coalesce(c.oid, 0)::bigint, coalesce(i.key_attnum, 0), coalesce(i.text_attnum, 0),
       (SELECT count(*) FROM pg_catalog.pg_attribute AS a
        WHERE a.attrelid = c.oid AND a.attnum > 0 AND a.attnum <= i.key_attnum
          AND NOT a.attisdropped),
       (SELECT count(*) FROM pg_catalog.pg_attribute AS a
        WHERE a.attrelid = c.oid AND a.attnum > 0 AND a.attnum <= i.text_attnum
          AND NOT a.attisdropped),
       i.clustering, i.broken, i.last_error, i.last_error_at
FROM {catalog} AS i
LEFT JOIN pg_catalog.pg_class AS c ON c.oid = i.source
LEFT JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
LEFT JOIN pg_catalog.pg_attribute AS k
  ON k.attrelid = c.oid AND k.attnum = i.key_attnum AND NOT k.attisdropped
LEFT JOIN pg_catalog.pg_attribute AS t
  ON t.attrelid = c.oid AND t.attnum = i.text_attnum AND NOT t.attisdropped
LEFT JOIN pg_catalog.pg_attribute AS kn
  ON kn.attrelid = c.oid AND kn.attname = i.key_column AND kn.attnum > 0 AND NOT kn.attisdropped
LEFT JOIN pg_catalog.pg_attribute AS tn
  ON tn.attrelid = c.oid AND tn.attname = i.text_column AND tn.attnum > 0
 AND NOT tn.attisdropped
CROSS JOIN LATERAL (SELECT {drift}(i) AS drift) AS d
WHERE i.name = %(name)s

-- name: catalog_restored
-- After a restore from a dump (tables of other OIDs than those recorded): each such source's
-- columns found again by name (follow_source_v1), as the first write or ALTER TABLE would.
SELECT {follow}(s.relid)
FROM (SELECT DISTINCT i.source::oid AS relid FROM {catalog} AS i
      JOIN pg_catalog.pg_class AS c ON c.oid = i.source::oid
      WHERE i.source_oid IS DISTINCT FROM i.source::oid) AS s

-- name: catalog_share
-- A batch's hold on its index's catalog row (share_index_v1, migration 0006).
SELECT {function}(%(name)s)

-- name: catalog_lock
-- Serialises builds and drops of one index.
SELECT 1 FROM {catalog} WHERE name = {name} FOR UPDATE

-- name: catalog_list
SELECT name FROM {catalog} ORDER BY name

-- name: catalog_set_side
-- The side table the query functions read, recorded in the transaction that made it (see the
-- catalog's side column): a query whose snapshot predates it sees another one, or none.
UPDATE {catalog} SET side = {table}::pg_catalog.regclass WHERE name = {name}

-- name: catalog_built
UPDATE {catalog}
SET state = 'ready', state_reason = NULL, source_oid = source, row_count = %(row_count)s,
    skipped_count = %(skipped_count)s, built_at = now(), updated_at = now()
WHERE name = %(name)s

-- name: catalog_set_spec
-- A build that chose a new design or learned shingle counts records it with the rows it wrote.
UPDATE {catalog} SET spec = %(spec)s::jsonb, spec_version = %(spec_version)s WHERE name = %(name)s

-- name: catalog_delete
DELETE FROM {catalog} WHERE name = {name}

-- name: catalog_table_bytes
-- Disk use of an index's tables, indexes and TOAST included.
SELECT c.relname, pg_catalog.pg_total_relation_size(c.oid)
FROM unnest(%(tables)s::text[]) WITH ORDINALITY AS t (qualified, n)
JOIN pg_catalog.pg_class AS c ON c.oid = pg_catalog.to_regclass(t.qualified)
ORDER BY t.n

-- name: catalog_record_health
-- The sync worker's record of an index's health: broken, row_error or recovered (see
-- record_health_v1, which the worker right may call; the catalog is not theirs to write).
SELECT {function}(%(name)s, %(health)s, %(error)s)

-- name: catalog_record_resolved
-- The last error is forgotten once nothing holds it: the index is not broken and no failed
-- item is left (retried and indexed, or its row gone). Changes nothing, and locks no row, in
-- the usual case: a batch of an index with no error to forget.
SELECT {function}(%(name)s, 'resolved', NULL) WHERE NOT EXISTS (SELECT FROM {failed})
