SELECT product_id::text AS k, count(*) FROM orders GROUP BY 1 ORDER BY 1 LIMIT 3
