-- intent: a UNION ALL branch with a bounds: auto column is refused
SELECT sum(score) FROM orders UNION ALL SELECT sum(amount) FROM orders
