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

-- name: demo_server_version
SELECT pg_catalog.current_setting('server_version')
