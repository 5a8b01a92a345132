-- intent: a raw column neither grouped nor aggregated is refused: it would reveal individual rows
SELECT region, count(*) FROM orders
