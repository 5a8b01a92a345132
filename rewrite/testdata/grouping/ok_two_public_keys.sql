SELECT region, channel, count(*) FROM orders GROUP BY 1, 2
