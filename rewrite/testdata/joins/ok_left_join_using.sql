-- intent: LEFT JOIN ... USING to a public table with the private table on the preserved side, filtered on a public column
SELECT count(*) FROM orders LEFT JOIN products USING (product_id) WHERE price > 10
