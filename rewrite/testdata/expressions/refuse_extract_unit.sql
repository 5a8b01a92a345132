SELECT extract(hour FROM created_at), count(*) FROM orders GROUP BY 1
