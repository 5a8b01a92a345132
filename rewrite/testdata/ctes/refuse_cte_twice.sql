-- intent: a CTE over the private table read twice is refused: the table may be read once per query
WITH o AS (SELECT * FROM orders) SELECT count(*) FROM o a JOIN o b ON a.customer_id = b.customer_id
