SELECT count(DISTINCT customer_id) FILTER (WHERE amount > 100) FROM orders
