-- intent: plain EXPLAIN of a query over a public table passes through, qualified
EXPLAIN (COSTS OFF) SELECT * FROM products WHERE id = 1
