WITH c AS (SELECT * FROM products) SELECT count(*) FROM orders o, c WHERE c.price > o.amount
