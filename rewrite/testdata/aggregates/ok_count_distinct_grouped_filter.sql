SELECT channel, count(DISTINCT product_id) FILTER (WHERE amount > 10), count(*) FROM orders GROUP BY channel
