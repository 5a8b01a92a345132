-- intent: a branch that is not a DP query (a per-row read) makes the whole UNION ALL refused, before anything runs
SELECT count(*)::text FROM orders UNION ALL SELECT channel FROM orders
