-- intent: two count(DISTINCT ...) of different non-unit columns in one query are refused
SELECT count(DISTINCT product_id), count(DISTINCT channel) FROM orders
