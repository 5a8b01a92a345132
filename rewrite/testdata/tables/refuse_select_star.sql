SELECT * FROM orders
