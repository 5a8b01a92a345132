-- A role's settings (ALTER ROLE ... SET) may hold anything.
SELECT setrole, setconfig FROM pg_db_role_setting
