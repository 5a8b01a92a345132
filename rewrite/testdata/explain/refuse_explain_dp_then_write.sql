-- intent: a write after EXPLAIN DP in the same text refuses the whole text
EXPLAIN DP SELECT count(*) FROM orders; UPDATE products SET id = 2
