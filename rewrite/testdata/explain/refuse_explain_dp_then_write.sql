EXPLAIN DP SELECT count(*) FROM orders; UPDATE products SET id = 2
