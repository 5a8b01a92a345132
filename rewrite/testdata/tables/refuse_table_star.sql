SELECT o.*, count(*) FROM orders o
