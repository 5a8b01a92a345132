-- intent: a LIKE pattern cast to name is cut to 63 bytes: refused
SELECT count(*) FROM orders WHERE region LIKE 'a%'::name
