-- intent: Superset's weekly grain on a date column: week is a valid unit for a date (converted to timestamptz), guarded at the ends of the range
SELECT DATE_TRUNC('week', created_at) AS __timestamp, COUNT(*) AS count FROM public.orders GROUP BY DATE_TRUNC('week', created_at) LIMIT 50000
