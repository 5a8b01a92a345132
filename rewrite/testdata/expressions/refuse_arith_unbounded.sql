SELECT sum(quantity * 2) FROM orders
