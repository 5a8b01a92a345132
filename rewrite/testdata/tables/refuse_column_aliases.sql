-- intent: column aliases on the private table are refused (not supported)
SELECT count(*) FROM orders AS o(a, b)
