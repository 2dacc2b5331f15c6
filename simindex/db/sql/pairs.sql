-- name: simhash_pairs
-- One Manku table's share of all pairs: rows with the same prefix, within the distance, each
-- pair once (left < right) and only in the first table that finds it (the "earlier" conditions rule out
-- pairs whose fingerprints also agree on an earlier table's prefix bits).
SELECT a.key AS left_key, b.key AS right_key,
    {distance}(a.fingerprint, b.fingerprint) AS distance
FROM {table} AS a
JOIN {table} AS b ON {same_prefix} AND a.key OPERATOR(pg_catalog.<) b.key
WHERE {distance}(a.fingerprint, b.fingerprint) <= {max_distance}{earlier}

-- name: pairs_function
-- Every pair, for SQL callers: the arms of the Python path, in one function. Not a reader's
-- right (pairs_revoke_function): n identical rows make n(n-1)/2 pairs, which the Python path
-- collapses into groups. No SET work_mem: the caller's own settings govern its cost.
CREATE FUNCTION {function}({parameter} {parameter_type} DEFAULT {default})
RETURNS TABLE (left_key {key_type}, right_key {key_type}, {score} {score_type})
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
BEGIN
    PERFORM {usable}({index_name});
    IF {parameter} IS NULL OR {parameter} < {lowest} OR {parameter} > {highest} THEN
        RAISE EXCEPTION '{parameter} must be from % to %, got %', {lowest}, {highest},
            {parameter} USING ERRCODE = '22023';
    END IF;
    -- Only keys the source holds: a deleted row's index rows stay until the worker's sweep.
    RETURN QUERY SELECT p.* FROM ({query}) AS p
    WHERE {visible}(p.left_key) AND {visible}(p.right_key);
END
$body$

-- name: pairs_revoke_function
REVOKE ALL ON FUNCTION {function} FROM PUBLIC

-- name: pairs_work_mem
-- The self-joins hash a whole side table; give them room instead of spilling to disk.
SET LOCAL work_mem = '256MB'

-- name: pairs_drop_grouping
DROP TABLE IF EXISTS pg_temp.simindex_node_of, pg_temp.simindex_distinct

-- name: pairs_node_of
-- Each row's node: the smallest key among the rows identical to it. {identity} is the
-- fingerprint, or the shingle set's hash and the whole sketch (MinHash): compared in full, not
-- by a hash of them. Only rows whose key the source holds (one hash semi-join): a deleted row's
-- index rows stay until the worker's sweep, and no pair or cluster may name it.
CREATE TEMP TABLE simindex_node_of ON COMMIT DROP AS
SELECT s.key, first_value(s.key) OVER (PARTITION BY {identity} ORDER BY s.key) AS node
FROM {side} AS s
WHERE EXISTS (SELECT FROM ONLY {source} AS t WHERE t.{key} OPERATOR(pg_catalog.=) s.key)

-- name: pairs_distinct
-- One row per node: the band or prefix self-joins run on these only, so a thousand identical
-- rows cost one row there, not half a million pairs.
CREATE TEMP TABLE simindex_distinct ON COMMIT DROP AS
SELECT s.* FROM {side} AS s
JOIN simindex_node_of AS n
  ON n.key OPERATOR(pg_catalog.=) s.key AND n.node OPERATOR(pg_catalog.=) s.key

-- name: pairs_analyze_grouping
ANALYZE simindex_node_of, simindex_distinct

-- name: pairs_expanded
-- A pair of nodes stands for every pair of their rows, at the same distance or similarity.
SELECT least(x.key, y.key) AS left_key, greatest(x.key, y.key) AS right_key, p.{score}
FROM ({pairs}) AS p
JOIN simindex_node_of AS x ON x.node OPERATOR(pg_catalog.=) p.left_key
JOIN simindex_node_of AS y ON y.node OPERATOR(pg_catalog.=) p.right_key

-- name: pairs_groups
-- The rows of each group of identical rows, one row each (an array of an extension's type,
-- citext[], would reach Python as its text), by group and in key order.
SELECT n.node, n.key FROM simindex_node_of AS n
WHERE n.node OPERATOR(pg_catalog.=) ANY (
    SELECT node FROM simindex_node_of GROUP BY node HAVING count(*) > 1
)
ORDER BY n.node, n.key

-- name: pairs_ordered
-- Every band's candidate pairs, by left key: exact verification reads each left row once.
SELECT c.left_key, c.right_key, c.similarity FROM ({pairs}) AS c ORDER BY c.left_key, c.right_key
