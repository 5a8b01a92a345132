SELECT channel, count(*) FROM orders GROUP BY channel
