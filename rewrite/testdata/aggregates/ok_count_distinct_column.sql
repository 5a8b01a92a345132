SELECT count(DISTINCT region) FROM orders
