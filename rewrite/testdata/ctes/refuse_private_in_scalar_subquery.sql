-- intent: the private table in a scalar subquery is refused: it may only be read in FROM
SELECT (SELECT count(*) FROM orders)
