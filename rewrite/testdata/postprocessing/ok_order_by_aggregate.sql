SELECT product_id, sum(amount) FROM orders GROUP BY product_id ORDER BY sum(amount) DESC, product_id
