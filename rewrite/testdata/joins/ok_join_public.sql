SELECT count(*) FROM orders o JOIN products p ON p.id = o.product_id
