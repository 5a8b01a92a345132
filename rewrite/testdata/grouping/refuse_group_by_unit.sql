-- intent: GROUP BY the privacy unit is refused: it would release per-person values
SELECT customer_id, count(*) FROM orders GROUP BY customer_id
