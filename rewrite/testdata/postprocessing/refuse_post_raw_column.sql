SELECT region, count(*) + amount FROM orders GROUP BY region
