-- intent: UNION without ALL would compare the branches' noisy rows; refused with a hint to use UNION ALL
SELECT DISTINCT channel FROM orders UNION SELECT DISTINCT region FROM orders
