-- intent: a cast group key (product_id::text) goes through partition selection, and ORDER BY with LIMIT applies to the released rows
SELECT product_id::text AS k, count(*) FROM orders GROUP BY 1 ORDER BY 1 LIMIT 3
