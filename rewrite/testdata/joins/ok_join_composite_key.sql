SELECT p.category, count(*) FROM orders o JOIN products p ON p.name = o.sku AND p.category = o.region GROUP BY p.category
