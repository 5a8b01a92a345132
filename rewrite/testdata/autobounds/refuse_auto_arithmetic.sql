-- intent: arithmetic over a bounds: auto column is refused with a clear message
SELECT sum(score * 2) FROM orders
