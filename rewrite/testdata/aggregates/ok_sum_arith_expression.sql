SELECT sum(amount * 2) FROM orders
