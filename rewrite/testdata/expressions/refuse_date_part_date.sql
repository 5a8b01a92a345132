SELECT date_part('year', created_at) AS y, count(*) FROM orders GROUP BY 1
