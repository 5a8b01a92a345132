SELECT lower(channel) AS ch FROM orders GROUP BY channel HAVING sum(amount) > 1000 AND count(*) > 10 ORDER BY ch
