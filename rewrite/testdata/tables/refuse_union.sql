-- intent: UNION over the private table is refused: each branch would need its own budget
SELECT count(*) FROM orders UNION ALL SELECT count(*) FROM products
