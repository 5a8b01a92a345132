SELECT count(*) FROM orders LEFT JOIN products USING (product_id) WHERE price > 10
