SELECT count(*) FROM orders o JOIN products p ON p.category = o.region
