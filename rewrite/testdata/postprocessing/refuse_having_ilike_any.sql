-- intent: ILIKE ANY of an array in HAVING is refused: PostgreSQL moves the condition on a group key into WHERE, and estimating it matches every pattern against the column's statistics before the charge (red team, issue 14: a free oracle on histogram values)
SELECT channel, count(*) FROM orders GROUP BY channel HAVING channel ILIKE ANY (ARRAY['w\'])
