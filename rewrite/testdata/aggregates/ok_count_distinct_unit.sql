SELECT count(DISTINCT customer_id) AS customers FROM public.orders
