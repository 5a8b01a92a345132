-- intent: pg_db_role_setting is refused: role and database settings may hold anything
-- A role's settings (ALTER ROLE ... SET) may hold anything.
SELECT setrole, setconfig FROM pg_db_role_setting
