WITH c AS (SELECT product_id, category FROM products WHERE category = 'audio') SELECT count(*) FROM orders LEFT JOIN c USING (product_id)
