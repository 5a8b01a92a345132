-- intent: DISTINCT ON picks one row per key, a per-person value: refused
SELECT DISTINCT ON (product_id) product_id, amount FROM orders
