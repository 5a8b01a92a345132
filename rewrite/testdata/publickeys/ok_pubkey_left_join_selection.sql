-- intent: a public table on the nullable side of a LEFT JOIN keeps partition selection: orders without a match form a NULL group, not among the table's values
SELECT p.category, count(*) FROM orders o LEFT JOIN products p ON p.product_id = o.product_id GROUP BY p.category
