-- intent: DISTINCT over a grouped query whose outputs are not all keys is refused
SELECT DISTINCT product_id, count(*) FROM orders GROUP BY product_id
