-- name: clusters_create_table
-- Each indexed row's cluster: the smallest key of its connected component (or its own key).
CREATE TABLE IF NOT EXISTS {table} (
    key {key_type} PRIMARY KEY,
    cluster_id {key_type} NOT NULL
)

-- name: clusters_create_cluster_index
CREATE INDEX IF NOT EXISTS {index} ON {table} (cluster_id)

-- name: clusters_edges
-- rank: lower is nearer (the distance, or minus the similarity).
CREATE TEMP TABLE simindex_edges (
    a {key_type} NOT NULL,
    b {key_type} NOT NULL,
    rank double precision NOT NULL
) ON COMMIT DROP

-- name: clusters_insert_edges
INSERT INTO simindex_edges (a, b, rank) SELECT p.left_key, p.right_key, {rank} FROM ({pairs}) AS p

-- name: clusters_copy_edges
COPY simindex_edges (a, b, rank) FROM STDIN

-- name: clusters_nodes
-- Dense ids in key order, so the smallest id of a component is its smallest key.
CREATE TEMP TABLE simindex_nodes ON COMMIT DROP AS
SELECT row_number() OVER (ORDER BY n.key) AS id, n.key
FROM (SELECT a FROM simindex_edges UNION SELECT b FROM simindex_edges) AS n (key)

-- name: clusters_nodes_index
CREATE UNIQUE INDEX ON simindex_nodes (key)

-- name: clusters_links
CREATE TEMP TABLE simindex_links ON COMMIT DROP AS
SELECT x.id AS a, y.id AS b, e.rank
FROM simindex_edges AS e
JOIN simindex_nodes AS x ON x.key OPERATOR(pg_catalog.=) e.a
JOIN simindex_nodes AS y ON y.key OPERATOR(pg_catalog.=) e.b

-- name: clusters_labels
CREATE TEMP TABLE simindex_labels ON COMMIT DROP AS SELECT id, id AS label FROM simindex_nodes

-- name: clusters_leader_labels
-- Leader clustering in key order: each node follows its nearest neighbour among the earlier
-- (smaller) keys, ties to the smallest; a node with none leads its own cluster.
CREATE TEMP TABLE simindex_labels ON COMMIT DROP AS
SELECT n.id, coalesce(p.parent, n.id) AS label
FROM simindex_nodes AS n
LEFT JOIN (
    SELECT DISTINCT ON (b) b AS id, a AS parent FROM simindex_links ORDER BY b, rank, a
) AS p ON p.id = n.id

-- name: clusters_labels_key
ALTER TABLE simindex_labels ADD PRIMARY KEY (id)

-- name: clusters_analyze
ANALYZE simindex_links, simindex_labels

-- name: clusters_propagate
-- Every node takes the smallest label among itself and its neighbours.
UPDATE simindex_labels AS l SET label = m.label
FROM (
    SELECT n.id, min(n.label) AS label
    FROM (
        SELECT k.a AS id, x.label FROM simindex_links AS k JOIN simindex_labels AS x ON x.id = k.b
        UNION ALL
        SELECT k.b, x.label FROM simindex_links AS k JOIN simindex_labels AS x ON x.id = k.a
    ) AS n
    GROUP BY n.id
) AS m
WHERE m.id = l.id AND m.label < l.label

-- name: clusters_jump
-- Pointer jumping: take the label of one's label, so long chains settle in a few rounds.
UPDATE simindex_labels AS l SET label = p.label
FROM simindex_labels AS p
WHERE p.id = l.label AND p.label < l.label

-- name: clusters_replace
-- Every indexed row: its node's component's smallest key, or its node's own key.
INSERT INTO {table} (key, cluster_id)
SELECT m.key, coalesce(c.cluster_id, m.node)
FROM ({members}) AS m
LEFT JOIN (
    SELECT n.key, first.key AS cluster_id
    FROM simindex_labels AS l
    JOIN simindex_nodes AS n ON n.id = l.id
    JOIN simindex_nodes AS first ON first.id = l.label
) AS c ON c.key OPERATOR(pg_catalog.=) m.node

-- name: clusters_collapsed_members
-- Identical rows are one node: the pairs among them are implied.
SELECT key, node FROM simindex_node_of

-- name: clusters_minhash_members
-- Every row the source holds (the collapsed rows' table lists them), each its own node.
SELECT n.key, n.key AS node FROM simindex_node_of AS n

-- name: clusters_share_grouping
-- The caller made the tables of the collapsed rows (reading the source, which the owner role
-- may not); the owner role writes the clusters from them.
GRANT SELECT ON simindex_node_of, simindex_distinct TO {owner}

-- name: clusters_bottom_k_keys
CREATE TEMP TABLE simindex_bottom_k (key {key_type} NOT NULL, bottom_k bigint NOT NULL)
ON COMMIT DROP

-- name: clusters_bottom_k_copy
COPY simindex_bottom_k (key, bottom_k) FROM STDIN

-- name: clusters_bottom_k_replace
-- Rows with the same bottom-k key form a cluster, named by its smallest key.
INSERT INTO {table} (key, cluster_id)
SELECT key, first_value(key) OVER (PARTITION BY bottom_k ORDER BY key) FROM simindex_bottom_k

-- name: clusters_set_method
UPDATE {catalog} SET clustering = %(method)s, updated_at = now() WHERE name = %(name)s

-- name: clusters_forget
DELETE FROM {table} WHERE key OPERATOR(pg_catalog.=) ANY(%(keys)s::{key_type}[])

-- name: clusters_assign
SELECT {function}(%(keys)s::{key_type}[])

-- name: clusters_assign_function
-- Sync's share of leader clustering: each written row, in key order, joins the cluster of its
-- nearest clustered neighbour within the index's limit, or leads a cluster of its own.
-- The neighbours come from the index's own key function, nearest first.
CREATE OR REPLACE FUNCTION {function}(keys {key_type}[])
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    row_key {key_type};
BEGIN
    IF keys IS NULL THEN
        RAISE EXCEPTION 'keys must not be NULL' USING ERRCODE = '22023';
    END IF;
    FOR row_key IN SELECT DISTINCT u.k FROM unnest(keys) AS u(k) ORDER BY 1 LOOP
        INSERT INTO {table} AS t (key, cluster_id)
        SELECT row_key, coalesce((
            SELECT c.cluster_id FROM {neighbours}(row_key) AS n
            JOIN {table} AS c ON c.key = n.key
            ORDER BY {nearest_first}, n.key LIMIT 1
        ), row_key)
        ON CONFLICT (key) DO UPDATE SET cluster_id = EXCLUDED.cluster_id;
    END LOOP;
END
$body$

-- name: clusters_truncate
TRUNCATE {table}

-- name: clusters_summary
SELECT count(*), count(DISTINCT cluster_id),
    coalesce(max(size), 0), count(*) FILTER (WHERE size > 1)
FROM (SELECT cluster_id, count(*) OVER (PARTITION BY cluster_id) AS size FROM {table}) AS c

-- name: clusters_members
-- Rows in clusters of at least min_size, a cluster's rows together; rows deleted from the
-- index or from the source since the clusters were made are left out (a deleted row's index
-- rows stay until the worker's sweep).
SELECT cluster_id, key, size
FROM (
    SELECT c.cluster_id, c.key, count(*) OVER (PARTITION BY c.cluster_id) AS size
    FROM {table} AS c
    WHERE EXISTS (SELECT FROM {side} AS s WHERE s.key OPERATOR(pg_catalog.=) c.key)
      AND {visible}(c.key)
) AS c
WHERE size >= %(min_size)s
ORDER BY size DESC, cluster_id, key

-- name: clusters_survivors_function
-- Every row of a cluster with more than one row, and whether it is the one to keep.
-- clustering: the method whose clusters the caller means (pairs, leader, bottom_k); the
-- clusters table holds the last run's, so any other is refused: a DELETE ... USING the
-- survivors never depends on which clustering happened to run last.
-- prefer: smallest_key, largest_key, longest_text, shortest_text, newest:<column>,
-- oldest:<column> (a column of the source table).
-- The source is found by OID and its key and text columns by number, as the catalog recorded
-- them: renames are followed. It is locked first and must still have the recorded types, so
-- the query below compares them with built-in operators only, whoever calls it.
CREATE OR REPLACE FUNCTION {function}(
    clustering text, prefer text DEFAULT 'smallest_key', max_rows integer DEFAULT {max_rows}
)
RETURNS TABLE (cluster_id {key_type}, key {key_type}, cluster_size bigint, survivor boolean)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    ordering text;
    source record;
BEGIN
    PERFORM {usable}({index_name});
    IF clustering IS NULL OR clustering NOT IN ('pairs', 'leader', 'bottom_k') THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'clustering must be pairs, leader '
            || 'or bottom_k (the method of the clusters run whose survivors you mean), got '
            || coalesce(quote_literal(clustering), 'NULL');
    END IF;
    SELECT i.source::regclass::text AS relation, i.clustering AS last INTO source
    FROM {catalog} AS i WHERE i.name = {index_name};
    IF source.last IS DISTINCT FROM clustering THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
            'the clusters of index %L are of its last clusters run, method %s, not %s: run '
            'clusters with method %s first, or ask for the survivors of %s',
            {index_name}, coalesce(source.last, 'none'), clustering, clustering,
            coalesce(source.last, 'none'));
    END IF;
    EXECUTE 'LOCK TABLE ' || source.relation || ' IN ACCESS SHARE MODE';
    SELECT i.source::regclass::text AS relation, k.attname AS key_column, t.attname AS text_column,
           {drift}(i) AS drift
    INTO source
    FROM {catalog} AS i
    LEFT JOIN pg_catalog.pg_attribute AS k
      ON k.attrelid = i.source AND k.attnum = i.key_attnum AND NOT k.attisdropped
    LEFT JOIN pg_catalog.pg_attribute AS t
      ON t.attrelid = i.source AND t.attnum = i.text_attnum AND NOT t.attisdropped
    WHERE i.name = {index_name};
    IF source.drift IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '55000',
            MESSAGE = 'simindex: index ' || quote_literal({index_name}) || ' needs a rebuild: '
                || source.drift;
    END IF;
    ordering := CASE
        WHEN prefer = 'smallest_key' THEN 'c.key'
        WHEN prefer = 'largest_key' THEN 'c.key DESC'
        WHEN prefer = 'longest_text'
            THEN format('length(s.%I) DESC NULLS LAST, c.key', source.text_column)
        WHEN prefer = 'shortest_text'
            THEN format('length(s.%I) NULLS LAST, c.key', source.text_column)
        WHEN prefer LIKE 'newest:_%' THEN format('s.%I DESC NULLS LAST, c.key', substr(prefer, 8))
        WHEN prefer LIKE 'oldest:_%' THEN format('s.%I NULLS LAST, c.key', substr(prefer, 8))
    END;
    IF ordering IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'prefer must be smallest_key, '
            || 'largest_key, longest_text, shortest_text, newest:<column> or oldest:<column>, '
            || 'got ' || coalesce(quote_literal(prefer), 'NULL');
    END IF;
    IF prefer ~ '^(newest|oldest):' AND NOT EXISTS (
        SELECT FROM pg_catalog.pg_attribute AS a
        WHERE a.attrelid = source.relation::regclass
          AND a.attname = substr(prefer, 8) AND a.attnum > 0 AND NOT a.attisdropped
    ) THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format(
            'prefer %L names no column of %s', prefer, source.relation);
    END IF;
    -- Every name goes in as an argument of format, never into its format string: a name may
    -- hold a percent sign.
    RETURN QUERY EXECUTE format(
        'SELECT c.cluster_id, c.key, c.size, '
        || 'row_number() OVER (PARTITION BY c.cluster_id ORDER BY %s) = 1 '
        || 'FROM (SELECT k.cluster_id, k.key, count(*) OVER (PARTITION BY k.cluster_id) AS size '
        || 'FROM %s AS k) AS c JOIN ONLY %s AS s ON s.%I = c.key WHERE c.size > 1 '
        || 'ORDER BY c.cluster_id, 4 DESC, c.key LIMIT $1',
        ordering, {clusters_table}, source.relation, source.key_column)
    USING max_rows;
END
$body$

-- name: clusters_exists
SELECT pg_catalog.to_regclass(%(table)s) IS NOT NULL

-- name: clusters_survivors
SELECT cluster_id, key, cluster_size, survivor
FROM {function}(%(clustering)s, %(prefer)s, NULL::integer)
