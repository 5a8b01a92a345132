-- intent: extract(dow FROM d) on a date column as a group key by position, as an analyst types it in psql
SELECT extract(dow FROM created_at) AS dow, count(*) FROM orders GROUP BY 1 ORDER BY 1
