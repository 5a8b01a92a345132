-- intent: a FULL JOIN with the private table is refused: only inner, left and right joins
SELECT count(*) FROM orders o FULL JOIN products p ON p.id = o.product_id
