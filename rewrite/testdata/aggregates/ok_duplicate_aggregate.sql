-- intent: the same aggregate twice is computed and noised once and released in both outputs
SELECT count(*), count(*) AS again FROM orders
