-- intent: a multi-column DISTINCT releases the combinations that pass partition selection
SELECT DISTINCT product_id, region FROM orders
