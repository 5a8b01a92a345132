-- intent: a write after a harmless statement refuses the whole text
SELECT 1; DELETE FROM products
