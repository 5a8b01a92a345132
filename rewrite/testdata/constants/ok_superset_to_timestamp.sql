-- intent: Superset's time range filter with TO_TIMESTAMP on a timestamptz column: hoisted, evaluated before the charge
SELECT count(*) AS count FROM public.orders WHERE ordered_at >= TO_TIMESTAMP('2023-01-01 00:00:00.000000', 'YYYY-MM-DD HH24:MI:SS.US') AND ordered_at < TO_TIMESTAMP('2025-01-01 00:00:00.000000', 'YYYY-MM-DD HH24:MI:SS.US')
