SELECT count(*) FROM orders OFFSET -1
