SELECT amount / 10, count(*) FROM orders GROUP BY 1
