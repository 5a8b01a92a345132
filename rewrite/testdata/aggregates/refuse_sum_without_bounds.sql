SELECT sum(quantity) FROM orders
