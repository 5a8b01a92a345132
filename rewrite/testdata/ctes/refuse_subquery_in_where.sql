-- intent: a public table read in a WHERE subquery of a private query is refused: join it in FROM
SELECT count(*) FROM orders WHERE product_id IN (SELECT id FROM products)
