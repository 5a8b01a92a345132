SELECT (SELECT count(*) FROM orders)
