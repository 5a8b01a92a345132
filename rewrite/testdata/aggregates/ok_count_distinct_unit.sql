-- intent: count(DISTINCT privacy_unit) counts persons, each contributing at most one, on a schema-qualified table
SELECT count(DISTINCT customer_id) AS customers FROM public.orders
