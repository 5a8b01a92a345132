-- intent: a date_trunc group key by position is guarded against out-of-range timestamps and released through partition selection, then ordered
SELECT date_trunc('month', ordered_at) AS month, count(*) FROM orders GROUP BY 1 ORDER BY 1
