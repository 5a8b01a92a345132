-- intent: a public table's key next to a key read from the private rows: partition selection, as before
SELECT p.category, o.quantity, count(*) FROM orders o JOIN products p ON p.product_id = o.product_id GROUP BY p.category, o.quantity
