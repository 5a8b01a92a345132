-- intent: CAST(extract(year ...) AS integer) would fail on an infinite date (extract gives Infinity): the rewrite passes extract NULL for infinite values instead
SELECT CAST(extract(year FROM created_at) AS integer) AS y, count(*) FROM orders GROUP BY 1
