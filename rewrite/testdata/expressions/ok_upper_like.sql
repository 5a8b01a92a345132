-- intent: upper(col) LIKE a constant pattern is total on a text column
SELECT count(*) FROM orders WHERE upper(region) LIKE 'NOR%'
