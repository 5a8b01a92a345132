SELECT extract(hour FROM ordered_at), count(*) FROM orders GROUP BY 1
