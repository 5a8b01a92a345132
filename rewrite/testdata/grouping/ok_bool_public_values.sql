-- intent: a boolean key's public values (configured as "TRUE", "no", "t") are released as PostgreSQL prints booleans, t and f, and the per-unit filter compares the column's text cast, true and false
SELECT paid, count(*) FROM orders GROUP BY paid
