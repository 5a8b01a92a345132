SELECT sum(CASE WHEN channel = 'web' THEN amount ELSE 0 END), sum(amount) FILTER (WHERE quantity > 2), avg(amount * 2 + 1) FROM orders
