-- name: role_remember
-- The caller's role ('none' when there was no SET ROLE), for role_restore.
SELECT pg_catalog.set_config('simindex.caller_role', pg_catalog.current_setting('role'), true)

-- name: role_become
SET LOCAL ROLE {role}

-- name: role_restore
SELECT pg_catalog.set_config('role', pg_catalog.current_setting('simindex.caller_role'), true)

-- name: role_exists
SELECT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = %(role)s)

-- name: role_is_superuser
SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user

-- name: grant_owner
GRANT {owner} TO {role}

-- name: grant_reader
-- Tables made later (each index's) get the same from the owner role's default privileges.
GRANT USAGE ON SCHEMA {schema} TO {role};
GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role};
ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA {schema} GRANT SELECT ON TABLES TO {role}

-- name: grant_writer
-- Every index's tables; of the catalog, only what locking a row FOR KEY SHARE needs (an UPDATE
-- right on one column): the catalog says which tables and types the others' SQL uses.
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role};
ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA {schema}
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {role};
REVOKE INSERT, UPDATE, DELETE ON TABLE {catalog}, {versions} FROM {role};
GRANT UPDATE (updated_at) ON TABLE {catalog} TO {role}

-- name: grant_sources
-- The indexed tables, as names PostgreSQL quoted.
SELECT DISTINCT i.source::text FROM {catalog} AS i
WHERE EXISTS (SELECT FROM pg_catalog.pg_class AS c WHERE c.oid = i.source)
ORDER BY 1
