-- intent: sum of amount * 2 is clamped to bounds derived from the column's ([0,1000])
SELECT sum(amount * 2) FROM orders
