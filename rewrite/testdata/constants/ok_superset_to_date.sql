-- intent: Superset's time range filter with TO_DATE: evaluated by the proxy before the charge and bound as a parameter
SELECT count(*) AS count FROM public.orders WHERE created_at >= TO_DATE('2023-01-01', 'YYYY-MM-DD') AND created_at < TO_DATE('2025-01-01', 'YYYY-MM-DD')
