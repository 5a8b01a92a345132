-- intent: a numeric(p,s) column divided by a non-zero constant in a group key is the same numeric division PostgreSQL computes (printed without rounding), and cannot fail
SELECT amount / 10, count(*) FROM orders GROUP BY 1
