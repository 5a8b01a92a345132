-- intent: HAVING may use aggregates that are not outputs: they are noised too and dropped from the result
SELECT lower(channel) AS ch FROM orders GROUP BY channel HAVING sum(amount) > 1000 AND count(*) > 10 ORDER BY ch
