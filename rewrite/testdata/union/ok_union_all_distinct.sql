-- intent: Grafana's filter-value query, a UNION ALL of SELECT DISTINCT subqueries, is answered branch by branch, each its own DP plan (the public-valued branch free)
SELECT DISTINCT channel AS v FROM orders UNION ALL SELECT DISTINCT region FROM orders
