-- intent: pg_prepared_statements is refused even inside a LATERAL subquery: sessions share upstream connections
-- Other sessions' prepared statements, in a LATERAL subquery.
SELECT n.nspname, p.statement FROM pg_namespace n, LATERAL (SELECT statement FROM pg_prepared_statements) p
