SELECT o.product_id AS p, count(o.amount) AS n FROM orders AS o GROUP BY o.product_id ORDER BY n DESC LIMIT 10 OFFSET 5
