SELECT min(amount) FROM orders
