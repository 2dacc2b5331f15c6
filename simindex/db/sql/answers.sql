-- What an index may answer a role (simindex.db.answers): no key of a row the role could not
-- SELECT from the source table, under its privileges and row-level security.

-- name: answers_visible_function
-- Whether the caller sees the source row of a key: a primary-key probe with the caller's own
-- rights (SECURITY INVOKER), so the source's privileges and RLS policies decide. The body names
-- the source as it is now, every name qualified and the comparison pg_catalog's (the key type
-- describe() admitted); a string body records no dependency, so the app may still drop or
-- change its table (a rename is followed: the event triggers and every build write it again).
-- PL/pgSQL: its plan is made once per session (a SQL function's body would be planned again
-- for every query, costing more than its probes), a probe by the primary key, never a hash of
-- the whole source. No SET clause: a GUC saved and restored per row would cost more than the
-- probe.
-- Its body is not checked when it is made: the owner role may not see the source's schema.
SELECT pg_catalog.set_config('simindex.check_function_bodies',
                             pg_catalog.current_setting('check_function_bodies'), true),
       pg_catalog.set_config('check_function_bodies', 'off', true);
CREATE OR REPLACE FUNCTION {function}(key {key_type})
RETURNS boolean LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $body$
BEGIN
    RETURN EXISTS (SELECT FROM {source} AS s WHERE s.{key} OPERATOR(pg_catalog.=) $1);
END
$body$;
-- The same probe for a query of many keys: the key when the caller sees its source row, no row
-- otherwise. SQL, STABLE, without a SET clause: the planner inlines it into the query that
-- calls it (a query function's candidates, each probed by the primary key in that query's own
-- plan, about a microsecond each, where a call of the function above costs several). The
-- inlined body runs with the caller's rights, as the function above does.
CREATE OR REPLACE FUNCTION {key_function}(key {key_type})
RETURNS SETOF {key_type} LANGUAGE sql STABLE PARALLEL SAFE
AS $body$
    SELECT s.{key} FROM {source} AS s WHERE s.{key} OPERATOR(pg_catalog.=) $1
$body$;
SELECT pg_catalog.set_config('check_function_bodies',
                             pg_catalog.current_setting('simindex.check_function_bodies'), true)

-- name: answers_protect
-- Row-level security on a table of simindex's holding keys of the source: a role sees the rows
-- whose keys it could see in the source. A role that may DELETE from the table (a worker, an
-- admin: they read and write every row, and their privilege is checked first, without a probe)
-- sees all. The table by its OID, not tableoid: a system column would rule out the
-- index-only scans of the query functions. The owner role, which writes these tables for the triggers and builds, is not
-- subject to them. Writes are governed by the table's privileges alone.
ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS simindex_read_v1 ON {table};
DROP POLICY IF EXISTS simindex_insert_v1 ON {table};
DROP POLICY IF EXISTS simindex_update_v1 ON {table};
DROP POLICY IF EXISTS simindex_delete_v1 ON {table};
CREATE POLICY simindex_read_v1 ON {table} FOR SELECT
    USING (pg_catalog.has_table_privilege({table_name}::regclass, 'DELETE') OR ({visible}));
CREATE POLICY simindex_insert_v1 ON {table} FOR INSERT WITH CHECK (true);
CREATE POLICY simindex_update_v1 ON {table} FOR UPDATE USING (true) WITH CHECK (true);
CREATE POLICY simindex_delete_v1 ON {table} FOR DELETE USING (true)

-- name: answers_visible_body
-- The body of an index's probe function, the source's names as the event triggers write them
-- (follow_source_v1), and whether the caller may act as the owner role to write it again.
SELECT (SELECT p.prosrc FROM pg_catalog.pg_proc AS p
        WHERE p.oid OPERATOR(pg_catalog.=) pg_catalog.to_regprocedure(%(signature)s)),
       pg_catalog.to_regclass(%(table)s)::pg_catalog.text,
       pg_catalog.quote_ident(%(key)s),
       pg_catalog.pg_has_role(%(owner)s, 'MEMBER')
