SELECT count(*) FROM orders GROUP BY region ORDER BY region
