-- intent: a LIKE pattern with an escaped % is a valid constant pattern and is allowed
SELECT count(*) FROM orders WHERE note LIKE '100\%'
