-- intent: a condition that filters the public table keeps partition selection: the query could not return the values it filters out
SELECT p.category, count(*) FROM orders o JOIN products p ON p.product_id = o.product_id WHERE p.price > 10 GROUP BY p.category
