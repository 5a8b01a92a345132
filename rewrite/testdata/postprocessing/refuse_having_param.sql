SELECT region FROM orders GROUP BY region HAVING count(*) > $1
