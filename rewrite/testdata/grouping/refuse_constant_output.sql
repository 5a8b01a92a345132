-- intent: a query over the private table with neither aggregates nor GROUP BY is refused: it would return one row per table row
SELECT 1 FROM orders
