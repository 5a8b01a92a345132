-- intent: the example of docs/design.md: count, sum and avg grouped by a public key with a WHERE, in one per-unit pass
SELECT region, count(*), sum(amount), avg(amount)
FROM orders WHERE amount > 10 GROUP BY region
