SELECT sum(DISTINCT amount) FROM orders
