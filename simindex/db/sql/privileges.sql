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

-- name: role_may_work
-- Whether the current role holds the writer part of the worker right (see grant_writer): the
-- column of the catalog that only a writer may update. CASE: no lookup in a schema the role
-- may not use (it would raise instead of saying no); NULL when there is no such schema.
SELECT current_user,
       CASE WHEN NOT EXISTS (SELECT FROM pg_catalog.pg_namespace WHERE nspname = %(schema)s)
            THEN NULL
            WHEN pg_catalog.has_schema_privilege(%(schema)s, 'USAGE')
            THEN pg_catalog.has_column_privilege(%(catalog)s, 'updated_at', 'UPDATE')
            ELSE false
       END

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

-- name: grant_worker
-- The worker records an index's health through this function, not by writing the catalog.
GRANT EXECUTE ON FUNCTION {health}(text, text, text) TO {role}

-- name: grant_sources
-- The indexed tables, as names PostgreSQL quoted.
SELECT DISTINCT i.source::text FROM {catalog} AS i
WHERE EXISTS (SELECT FROM pg_catalog.pg_class AS c WHERE c.oid = i.source)
ORDER BY 1

-- name: owner_type_usage
-- The owner role names the key's type in the side tables, queue and functions it creates, so
-- it needs USAGE on the schema of that type (and of a domain's base types). A role that may
-- grant it (the schema's owner, a superuser) grants it here; otherwise create stops, saying
-- which GRANT to run. Nothing else of the schema is granted.
DO $body$
DECLARE
    found record;
BEGIN
    FOR found IN
        WITH RECURSIVE chain (oid, typtype, typbasetype) AS (
            SELECT t.oid, t.typtype, t.typbasetype FROM pg_catalog.pg_type AS t
            WHERE t.oid = pg_catalog.to_regtype({key_type})
            UNION ALL
            SELECT u.oid, u.typtype, u.typbasetype
            FROM chain JOIN pg_catalog.pg_type AS u ON u.oid = chain.typbasetype
            WHERE chain.typtype = 'd'
        )
        SELECT DISTINCT n.oid, n.nspname FROM chain
        JOIN pg_catalog.pg_type AS t ON t.oid = chain.oid
        JOIN pg_catalog.pg_namespace AS n ON n.oid = t.typnamespace
        WHERE NOT pg_catalog.has_schema_privilege({owner}, n.oid, 'USAGE')
    LOOP
        IF NOT pg_catalog.has_schema_privilege(found.oid, 'USAGE WITH GRANT OPTION') THEN
            RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = pg_catalog.format(
                'simindex: its owner role %I needs USAGE on schema %I, where the key type %s '
                'is; the schema''s owner runs: GRANT USAGE ON SCHEMA %I TO %I',
                {owner}, found.nspname, {key_type}, found.nspname, {owner});
        END IF;
        EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA %I TO %I', found.nspname, {owner});
    END LOOP;
END
$body$
