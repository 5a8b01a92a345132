-- intent: count(col) with aliases, ORDER BY an aggregate's alias, LIMIT and OFFSET are applied after the noise, to the released groups
SELECT o.product_id AS p, count(o.amount) AS n FROM orders AS o GROUP BY o.product_id ORDER BY n DESC LIMIT 10 OFFSET 5
