SELECT count(*), count(*) AS again FROM orders
