-- intent: a public CTE joined by comma with a non-equality condition is refused: a public table must be joined on a unique key
WITH c AS (SELECT * FROM products) SELECT count(*) FROM orders o, c WHERE c.price > o.amount
