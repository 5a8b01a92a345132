-- intent: a public table's key next to a key with public_values: every combination is released, no partition selection
SELECT p.category, o.region, count(*) FROM orders o JOIN products p ON p.product_id = o.product_id GROUP BY p.category, o.region
