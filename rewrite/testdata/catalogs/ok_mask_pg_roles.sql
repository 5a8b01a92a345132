-- intent: psql's \du and DBeaver's role list read pg_roles and pg_user with the roles' settings masked
-- psql's \du and DBeaver's role list: the roles' settings are masked.
SELECT a.oid, a.* FROM pg_catalog.pg_roles a ORDER BY a.rolname;
select usename, usesysid, usesuper from pg_user
