SELECT count(*) FROM products p LEFT JOIN orders o ON o.product_id = p.id
