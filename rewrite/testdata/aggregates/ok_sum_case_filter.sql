-- intent: sum of a CASE, sum FILTER and avg of arithmetic each get bounds derived from their expression (amount * 2 + 1 is [1,1001])
SELECT sum(CASE WHEN channel = 'web' THEN amount ELSE 0 END), sum(amount) FILTER (WHERE quantity > 2), avg(amount * 2 + 1) FROM orders
