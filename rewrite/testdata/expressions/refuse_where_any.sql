-- intent: op ANY (array) in WHERE on the private table is refused (not supported)
SELECT count(*) FROM orders WHERE amount = ANY('{1,2}')
