SELECT count(*) FROM orders AS o(a, b)
