-- name: minhash_create_signatures
-- The signature of each document, to verify band candidates (estimated Jaccard).
CREATE TABLE {table} (
    key {key_type} PRIMARY KEY,
    signature bigint[] NOT NULL
)

-- name: minhash_create_bands
-- One row per (document, band): equal (band, hash) pairs are LSH candidates.
CREATE TABLE {table} (
    band smallint NOT NULL,
    hash bigint NOT NULL,
    key {key_type} NOT NULL
)

-- name: minhash_create_band_index
CREATE INDEX {index} ON {table} (band, hash) INCLUDE (key)

-- name: minhash_create_band_key_index
-- Deletes and updates find a document's bands by key.
CREATE INDEX {index} ON {table} (key)

-- name: minhash_copy_signatures
COPY {table} (key, signature) FROM STDIN

-- name: minhash_copy_bands
COPY {table} (band, hash, key) FROM STDIN

-- name: minhash_similar_function
-- Candidates share a band with the query; each is verified by its share of equal slots.
-- A text without features has NULL arrays: no candidates.
CREATE FUNCTION {function}(
    signature bigint[], band_keys bigint[], threshold double precision DEFAULT {threshold},
    max_rows integer DEFAULT {max_rows}
)
RETURNS TABLE (key {key_type}, similarity double precision)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $body$
BEGIN
    PERFORM {usable}({index_name});
    -- NaN sorts above every number, so it fails the upper bound.
    IF $3 IS NULL OR NOT ($3 >= 0 AND $3 <= 1) THEN
        RAISE EXCEPTION 'threshold must be from 0 to 1, got %', coalesce($3::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF ($1 IS NULL) <> ($2 IS NULL)
       OR cardinality($1) <> {num_perm}::integer OR cardinality($2) <> {num_bands} THEN
        RAISE EXCEPTION 'a signature of % values and % band hashes are needed (both NULL: a '
            'text without features), got % and %', {num_perm}::integer, {num_bands},
            coalesce(cardinality($1)::text, 'NULL'), coalesce(cardinality($2)::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
    SELECT s.key, v.similarity
    FROM (
        SELECT DISTINCT b.key
        FROM unnest($2) WITH ORDINALITY AS q(hash, band)
        JOIN {bands} AS b ON b.band = q.band - 1 AND b.hash = q.hash
    ) AS c
    JOIN {signatures} AS s ON s.key = c.key
    CROSS JOIN LATERAL (
        SELECT count(*) FILTER (WHERE x = y)::double precision / {num_perm} AS similarity
        FROM unnest(s.signature, $1) AS u(x, y)
    ) AS v
    WHERE v.similarity >= $3
    ORDER BY v.similarity DESC, s.key
    LIMIT $4;
END
$body$

-- name: minhash_similar_key_function
CREATE FUNCTION {function}(
    key {key_type}, threshold double precision DEFAULT {threshold},
    max_rows integer DEFAULT {max_rows}
)
RETURNS TABLE (key {key_type}, similarity double precision)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $body$
    SELECT n.key, n.similarity
    FROM {signatures} AS s
    CROSS JOIN LATERAL (
        SELECT array_agg(b.hash ORDER BY b.band) AS hashes FROM {bands} AS b WHERE b.key = $1
    ) AS h
    CROSS JOIN LATERAL {similar}(s.signature, h.hashes, $2, $3 + 1) AS n
    WHERE s.key = $1 AND n.key <> $1 AND {usable}({index_name})
    ORDER BY n.similarity DESC, n.key
    LIMIT $3
$body$

-- name: minhash_similar
-- max_rows NULL: every row (the function's own default is a bound, for SQL callers).
SELECT key, similarity
FROM {function}(%(signature)s::{array_type}[], %(band_keys)s::{array_type}[], %(threshold)s,
                %(limit)s::integer)
ORDER BY similarity DESC, key

-- name: minhash_similar_key
SELECT key, similarity FROM {function}(%(key)s, %(threshold)s, %(limit)s::integer)
ORDER BY similarity DESC, key

-- name: minhash_signature_of_key
SELECT signature FROM {table} WHERE key OPERATOR(pg_catalog.=) %(key)s

-- name: minhash_delete
DELETE FROM {table} WHERE key OPERATOR(pg_catalog.=) ANY(%(keys)s::{key_type}[])

-- name: minhash_insert_signatures
-- The signatures arrive as one flat array, num_perm values per key, in the keys' order (in
-- binary, like every bigint array of the sync worker's writes).
INSERT INTO {table} (key, signature)
SELECT u.key, (%(values)b::bigint[])[(u.n - 1) * {num_perm} + 1 : u.n * {num_perm}]
FROM unnest(%(keys)s::{key_type}[]) WITH ORDINALITY AS u (key, n)

-- name: minhash_insert_bands
-- The band hashes arrive as one flat array, num_bands values per key, in the keys' order.
INSERT INTO {table} (band, hash, key)
SELECT b.band::smallint, (%(hashes)b::bigint[])[(u.n - 1) * {num_bands} + b.band + 1], u.key
FROM unnest(%(keys)s::{key_type}[]) WITH ORDINALITY AS u (key, n),
     generate_series(0, {num_bands} - 1) AS b (band)
