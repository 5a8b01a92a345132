SELECT p.category, sum(o.amount) FROM (SELECT * FROM orders WHERE product_id < 30) o JOIN products p ON p.product_id = o.product_id GROUP BY p.category
