-- intent: in GROUP BY an input column wins over an output alias of the same name (PostgreSQL's rule): GROUP BY region is the column, so the output's created_at is not grouped
SELECT date_trunc('month', created_at) AS region, count(*) FROM orders GROUP BY region
