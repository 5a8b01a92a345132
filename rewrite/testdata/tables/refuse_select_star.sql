-- intent: SELECT * of the private table is refused: it returns individual rows
SELECT * FROM orders
