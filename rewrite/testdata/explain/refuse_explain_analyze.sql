-- intent: EXPLAIN ANALYZE is refused even on a constant: it runs the query and reports actual rows
EXPLAIN ANALYZE SELECT 1
