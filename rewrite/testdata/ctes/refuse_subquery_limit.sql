-- intent: LIMIT in a derived table over the private table is refused: which rows it keeps would depend on other people's rows
SELECT count(*) FROM (SELECT * FROM orders LIMIT 10) t
