-- intent: ORDER BY a group key that is not an output sorts by the released key
SELECT count(*) FROM orders GROUP BY region ORDER BY region
