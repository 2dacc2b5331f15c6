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
-- function that holds an index for a batch, which only a writer may call. CASE: no lookup in a
-- schema the role may not use (it would raise instead of saying no); NULL when there is no such
-- schema.
SELECT current_user,
       CASE WHEN NOT EXISTS (SELECT FROM pg_catalog.pg_namespace WHERE nspname = %(schema)s)
            THEN NULL
            WHEN pg_catalog.has_schema_privilege(%(schema)s, 'USAGE')
            THEN pg_catalog.has_function_privilege(%(share)s, 'EXECUTE')
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
-- No table of simindex's: a writer's transaction indexes the keys it changed through each
-- index's <name>_index_own_v1 (session_grant_own_function), which checks that, and holds its
-- index through share_index_v1; no role but the owner may lock or update catalog rows. Its
-- SELECT is the reader's (row-level security: the keys it may see in the source).
GRANT EXECUTE ON FUNCTION {share}(text) TO {role}

-- name: grant_worker_tables
-- Every index's tables, written directly by sync, check and repair (and every row seen).
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role};
ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA {schema}
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {role};
REVOKE INSERT, UPDATE, DELETE ON TABLE {catalog}, {versions} FROM {role}

-- name: grant_index_reader
-- The reader right on one index (simindex.grant(..., indexes=[...])): its tables only. The
-- catalog is read to find an index; what it says of another index is no key of a source.
GRANT USAGE ON SCHEMA {schema} TO {role};
GRANT SELECT ON TABLE {catalog} TO {role};
GRANT SELECT ON TABLE {tables} TO {role}

-- name: grant_index_writer
GRANT EXECUTE ON FUNCTION {own} TO {role};
GRANT EXECUTE ON FUNCTION {share}(text) TO {role}

-- name: grant_own_function
GRANT EXECUTE ON FUNCTION {own} TO {role}

-- name: grant_index_worker
GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE {tables} TO {role}

-- name: grant_index_source
SELECT i.source::text FROM {catalog} AS i
WHERE i.name = %(name)s AND EXISTS (SELECT FROM pg_catalog.pg_class AS c WHERE c.oid = i.source)

-- name: table_grants
-- The rights given on a table, but its owner's: (role, right) pairs, PUBLIC as NULL.
SELECT r.rolname, a.privilege_type
FROM pg_catalog.pg_class AS c
CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) AS a
LEFT JOIN pg_catalog.pg_roles AS r ON r.oid = a.grantee
WHERE c.oid = pg_catalog.to_regclass(%(table)s) AND a.grantee <> c.relowner
ORDER BY 1, 2

-- name: grant_table_right
GRANT {right} ON TABLE {table} TO {role}

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
