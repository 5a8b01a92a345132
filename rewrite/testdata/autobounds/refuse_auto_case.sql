-- intent: CASE over a bounds: auto column is refused too: only the bare column
SELECT avg(CASE WHEN quantity > 1 THEN score ELSE 0 END) FROM orders
