WITH c AS (SELECT product_id, category FROM products WHERE category = 'audio') SELECT c.category, count(*) FROM orders o LEFT JOIN c ON c.product_id = o.product_id GROUP BY c.category
