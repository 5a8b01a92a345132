-- intent: a UNION ALL with a branch over a public table only is refused: run that branch as its own query
SELECT count(*) FROM orders UNION ALL SELECT count(*) FROM products
