-- intent: COUNT of a bounds: auto column needs no bounds: no histogram
SELECT count(score) FROM orders
