-- intent: a grouped query without aggregates releases only the keys that pass partition selection
SELECT product_id FROM orders GROUP BY product_id
