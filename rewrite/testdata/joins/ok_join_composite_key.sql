-- intent: a public table joined on every column of a composite unique key matches each private row at most once
SELECT p.category, count(*) FROM orders o JOIN products p ON p.name = o.sku AND p.category = o.region GROUP BY p.category
