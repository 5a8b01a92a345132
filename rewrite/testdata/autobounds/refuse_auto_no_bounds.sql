-- intent: a column with no bounds and no auto is refused as before
SELECT sum(quantity) FROM orders
