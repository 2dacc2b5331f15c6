-- name: demo_create_schema
CREATE SCHEMA IF NOT EXISTS {schema}

-- name: demo_create_table
CREATE TABLE {table} (
    id integer PRIMARY KEY,
    package text NOT NULL,
    title text NOT NULL,
    body text NOT NULL
)

-- name: demo_copy
COPY {table} (id, package, title, body) FROM STDIN

-- name: demo_count
SELECT count(*) FROM {table}

-- name: demo_rows
SELECT id, package, title, body FROM {table} WHERE id = ANY(%(ids)s) ORDER BY id

-- name: demo_server_version
SELECT pg_catalog.current_setting('server_version')
