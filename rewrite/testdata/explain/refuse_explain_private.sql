EXPLAIN SELECT count(*) FROM orders
