-- intent: BI date filters (to_date, now() - interval, current_date - 30) become parameters computed up front, and a date_trunc group key is guarded against out-of-range timestamps
SELECT date_trunc('week', ordered_at) AS week, count(*) FROM orders WHERE ordered_at >= TO_DATE('2023-01-01', 'YYYY-MM-DD') AND ordered_at > now() - interval '30 days' AND created_at > current_date - 30 GROUP BY 1
