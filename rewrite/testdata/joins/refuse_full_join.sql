SELECT count(*) FROM orders o FULL JOIN products p ON p.id = o.product_id
