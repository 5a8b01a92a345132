SELECT count(*) FILTER (WHERE amount > 3) FROM orders
