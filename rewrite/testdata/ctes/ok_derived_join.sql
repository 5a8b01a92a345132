SELECT t.category, count(*) FROM (SELECT o.amount, p.category FROM orders o JOIN products p ON p.product_id = o.product_id) t GROUP BY t.category
