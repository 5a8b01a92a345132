SELECT count(*) OVER () FROM orders
