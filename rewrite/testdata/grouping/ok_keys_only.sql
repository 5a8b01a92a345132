SELECT product_id FROM orders GROUP BY product_id
