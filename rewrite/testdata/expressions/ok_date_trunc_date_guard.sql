-- intent: date_trunc on a date column is guarded against dates whose conversion to timestamp fails, and extract(year) of a date needs no guard
SELECT date_trunc('month', created_at) AS month, extract(year FROM created_at) AS y, count(*) FROM orders GROUP BY 1, 2
