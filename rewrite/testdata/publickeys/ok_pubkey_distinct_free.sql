-- intent: keys from a public table without aggregates read no private row: released free
SELECT DISTINCT p.category FROM orders o JOIN products p ON p.product_id = o.product_id
