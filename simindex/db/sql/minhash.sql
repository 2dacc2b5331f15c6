-- A MinHash index (simindex.core.packing): one table, one row per document.

-- name: minhash_create_table
-- The 32-bit signature, to verify candidates, and one 32-bit key per LSH band.
CREATE TABLE {table} (
    key {key_type} PRIMARY KEY,
    signature integer[] NOT NULL,
    {band_columns}
)

-- name: minhash_create_band_index
CREATE INDEX {index} ON {table} ({column})

-- name: minhash_copy
COPY {table} (key, signature, {columns}) FROM STDIN

-- name: minhash_similar_function
-- Candidates share a band key with the query (a BitmapOr of the band indexes: each row is read
-- once); each is verified by its share of equal slots, identical signatures without a count.
-- A text without features has NULL arrays: no candidates.
CREATE FUNCTION {function}(
    signature integer[],
    band_keys integer[],
    threshold double precision DEFAULT {threshold},
    max_rows integer DEFAULT {max_rows}
)
RETURNS TABLE (key {key_type}, similarity double precision)
LANGUAGE plpgsql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    simindex_current boolean;
BEGIN
    {guard};
    PERFORM {usable}({index_name});
    -- NaN sorts above every number, so it fails the upper bound.
    IF $3 IS NULL OR NOT ($3 >= 0 AND $3 <= 1) THEN
        RAISE EXCEPTION 'threshold must be from 0 to 1, got %', coalesce($3::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF ($1 IS NULL) <> ($2 IS NULL)
       OR cardinality($1) <> {num_perm}::integer OR cardinality($2) <> {num_bands} THEN
        RAISE EXCEPTION 'a signature of % values and % band keys are needed (both NULL: a '
            'text without features), got % and %', {num_perm}::integer, {num_bands},
            coalesce(cardinality($1)::text, 'NULL'), coalesce(cardinality($2)::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF $4 < 1 THEN
        RAISE EXCEPTION 'max_rows must be at least 1, got %', $4 USING ERRCODE = '22023';
    END IF;
    IF $1 IS NULL THEN  -- no signature, no row (similar_key's call of the guard alone)
        RETURN;
    END IF;
    RETURN QUERY
    SELECT c.key, v.similarity
    FROM {table} AS c
    CROSS JOIN LATERAL (
        SELECT CASE WHEN c.signature = $1 THEN 1.0::double precision ELSE (
            SELECT count(*) FILTER (WHERE x = y)::double precision / {num_perm}
            FROM unnest(c.signature, $1) AS u(x, y)
        ) END AS similarity
    ) AS v
    -- Only keys the source holds: a deleted row's index rows stay until the worker's sweep.
    WHERE ({any_band}) AND v.similarity >= $3 AND {visible}(c.key)
    ORDER BY v.similarity DESC, c.key
    LIMIT $4;
END
$body$

-- name: minhash_similar_key_function
CREATE FUNCTION {function}(
    key {key_type}, threshold double precision DEFAULT {threshold},
    max_rows integer DEFAULT {max_rows}
)
RETURNS TABLE (key {key_type}, similarity double precision)
LANGUAGE sql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $body$
    -- The table's lock first (a rebuild's swap is waited for here), then the query
    -- function's guard alone, no signature: the next statement's snapshot sees the rebuilt
    -- table, or the guard fails where the transaction's cannot (see common.sql). In this
    -- order, the query function is looked up after the wait: the one the rebuild wrote.
    SELECT (SELECT true FROM {table} LIMIT 0),
           (SELECT count(*) FROM {similar}(NULL::integer[], NULL::integer[], $2, 1));
    SELECT n.key, n.similarity
    FROM {table} AS s
    CROSS JOIN LATERAL {similar}(s.signature, ARRAY[{band_columns}], $2, $3 + 1) AS n
    WHERE s.key = $1 AND n.key <> $1 AND {usable}({index_name})
    ORDER BY n.similarity DESC, n.key
    LIMIT $3
$body$

-- name: minhash_pairs
-- One band's share of all pairs: rows with the same band key and the same band values,
-- verified by estimated Jaccard, each pair once (left < right) and only in the first band they
-- share (the "earlier" conditions). The self-join reads only keys and band keys, so its hash
-- table stays small; signatures are fetched for the candidate pairs alone.
SELECT a.key AS left_key, b.key AS right_key, v.similarity
FROM (
    SELECT x.key AS left_key, y.key AS right_key
    FROM {table} AS x
    JOIN {table} AS y ON y.{column} = x.{column} AND x.key OPERATOR(pg_catalog.<) y.key
    OFFSET 0
) AS c
JOIN {table} AS a ON a.key OPERATOR(pg_catalog.=) c.left_key
JOIN {table} AS b ON b.key OPERATOR(pg_catalog.=) c.right_key
CROSS JOIN LATERAL (
    SELECT CASE WHEN a.signature = b.signature THEN 1.0::double precision ELSE (
        SELECT count(*) FILTER (WHERE x = y)::double precision / {num_perm}
        FROM unnest(a.signature, b.signature) AS u(x, y)
    ) END AS similarity
) AS v
WHERE a.signature[{low}:{high}] = b.signature[{low}:{high}]{earlier}
  AND v.similarity >= {threshold}

-- name: minhash_insert
-- The sync worker's write: the signatures as one flat array, num_perm values per key, and the
-- band keys likewise, num_bands per key, in the keys' order (binary bigint arrays).
INSERT INTO {table} (key, signature, {columns})
SELECT u.key, (%(values)b::bigint[])[(u.n - 1) * {num_perm} + 1 : u.n * {num_perm}]::integer[],
    {band_values}
FROM unnest(%(keys)s::{key_type}[]) WITH ORDINALITY AS u (key, n)
CROSS JOIN LATERAL (SELECT %(bands)b::bigint[] AS b) AS h

-- name: minhash_delete
DELETE FROM {table} WHERE key OPERATOR(pg_catalog.=) ANY(%(keys)s::{key_type}[])

-- name: minhash_check_rows
SELECT s.{key}, s.{text}::text, g.signature, ARRAY[{band_columns}]
FROM ONLY {source} AS s {sample}
LEFT JOIN {table} AS g ON g.key OPERATOR(pg_catalog.=) s.{key}

-- name: minhash_similar
-- max_rows NULL: every row (the function's own default is a bound, for SQL callers).
SELECT key, similarity
FROM {function}(%(signature)s::integer[], %(band_keys)s::integer[], %(threshold)s,
                %(limit)s::integer)
ORDER BY similarity DESC, key

-- name: minhash_similar_key
SELECT key, similarity FROM {function}(%(key)s, %(threshold)s, %(limit)s::integer)
ORDER BY similarity DESC, key

-- name: minhash_signature_of_key
SELECT signature FROM {table} WHERE key OPERATOR(pg_catalog.=) %(key)s
