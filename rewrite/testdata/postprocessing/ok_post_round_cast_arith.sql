-- intent: round, casts and arithmetic on noisy aggregates, ORDER BY an aggregate and LIMIT are computed after the release
SELECT region, round(avg(amount), 2) AS mean, count(*)::numeric / 2 AS half, sum(amount)::int8 FROM orders GROUP BY region ORDER BY count(*) DESC LIMIT 2
