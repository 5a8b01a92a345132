-- intent: the private table on the nullable side of a LEFT JOIN is refused: unmatched rows would belong to no person
SELECT count(*) FROM products p LEFT JOIN orders o ON o.product_id = p.id
