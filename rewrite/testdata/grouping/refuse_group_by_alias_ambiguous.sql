-- intent: two outputs with the same alias and different values make GROUP BY of that name ambiguous, as in PostgreSQL
SELECT channel AS c, region AS c, count(*) FROM orders GROUP BY c
