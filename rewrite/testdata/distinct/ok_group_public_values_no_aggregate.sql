-- intent: GROUP BY a public-valued key without aggregates releases every configured value and charges nothing
SELECT region FROM orders WHERE amount > 100 GROUP BY region
