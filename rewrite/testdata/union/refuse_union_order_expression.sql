-- intent: ORDER BY an expression over a UNION ALL of DP queries is refused with how to write it
SELECT DISTINCT channel AS v FROM orders UNION ALL SELECT DISTINCT region FROM orders ORDER BY lower(v)
