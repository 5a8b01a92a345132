-- intent: median, not a PostgreSQL aggregate, is refused with a hint to percentile_cont(0.5)
SELECT median(amount) FROM orders
