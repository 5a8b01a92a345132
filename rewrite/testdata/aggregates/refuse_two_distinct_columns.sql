SELECT count(DISTINCT product_id), count(DISTINCT channel) FROM orders
