SELECT date_trunc('month', created_at) AS month, extract(year FROM created_at) AS y, count(*) FROM orders GROUP BY 1, 2
