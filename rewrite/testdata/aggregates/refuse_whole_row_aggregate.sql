SELECT count(o) FROM orders o
