SELECT region, count(*) FROM orders GROUP BY region HAVING count(*) > 5
