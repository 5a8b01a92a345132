-- intent: SELECT * FROM the private table in a derived table is inlined when the outer query aggregates it
SELECT count(*) FROM (SELECT * FROM orders) s
