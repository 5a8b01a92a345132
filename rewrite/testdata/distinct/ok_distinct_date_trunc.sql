-- intent: DISTINCT of a time bucket (Grafana's time-based template variable) is planned as GROUP BY the bucket, judged by the same totality rules
SELECT DISTINCT date_trunc('month', ordered_at) AS month FROM orders WHERE amount > $1 ORDER BY 1
