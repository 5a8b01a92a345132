SELECT region, count(*), sum(amount), avg(amount)
FROM orders WHERE amount > 10 GROUP BY region
