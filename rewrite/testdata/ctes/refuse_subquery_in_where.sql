SELECT count(*) FROM orders WHERE product_id IN (SELECT id FROM products)
