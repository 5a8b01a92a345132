-- intent: ORDER BY and LIMIT over a UNION ALL of DP queries sort and cut the released rows only
SELECT DISTINCT channel AS v FROM orders UNION ALL SELECT DISTINCT region FROM orders ORDER BY v DESC LIMIT 5
