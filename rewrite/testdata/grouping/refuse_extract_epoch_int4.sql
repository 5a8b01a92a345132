-- intent: the epoch of a date exceeds int4, so casting it to integer could fail on a far date: refused (bigint is accepted)
SELECT CAST(extract(epoch FROM created_at) AS integer) AS e, count(*) FROM orders GROUP BY 1
