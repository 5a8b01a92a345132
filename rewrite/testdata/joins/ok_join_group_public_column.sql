-- intent: grouping by a column of a joined public table without public values goes through partition selection
SELECT p.category, sum(o.amount) FROM orders o JOIN products p ON p.product_id = o.product_id GROUP BY p.category
