-- intent: GROUP BY an output alias (not a column of the table) is that output's expression, as in PostgreSQL
SELECT date_trunc('month', created_at) AS m, count(*) FROM orders GROUP BY m ORDER BY m
