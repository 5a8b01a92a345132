-- intent: a LIKE pattern cast to char(n) is cut and trimmed: refused
SELECT count(*) FROM orders WHERE region LIKE 'a\b'::char(2)
