-- intent: DISTINCT of the privacy unit would list the people: refused like GROUP BY the unit
SELECT DISTINCT customer_id FROM orders
