-- intent: SELECT * inside a CTE is fine when the outer query only aggregates it
WITH o AS (SELECT * FROM orders) SELECT count(*) FROM o
