SELECT count(*) FROM orders UNION ALL SELECT count(*) FROM products
