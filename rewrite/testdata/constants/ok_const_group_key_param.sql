SELECT CASE WHEN channel = 'web' THEN date_trunc('day', $1::text::timestamptz) END AS k, count(*) FROM orders GROUP BY 1
