-- intent: plain EXPLAIN of a query over the private table is refused: row estimates reveal counts
EXPLAIN SELECT count(*) FROM orders
