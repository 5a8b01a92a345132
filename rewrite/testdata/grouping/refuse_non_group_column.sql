SELECT region, count(*) FROM orders
