-- intent: count(DISTINCT col) FILTER next to count(*) in a grouped query: the filter stays inside the per-unit distinct count
SELECT channel, count(DISTINCT product_id) FILTER (WHERE amount > 10), count(*) FROM orders GROUP BY channel
