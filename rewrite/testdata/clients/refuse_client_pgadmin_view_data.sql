-- intent: pgAdmin's View Data > First 100 Rows of a private table is refused as row-level, with the data viewer hint
SELECT * FROM public.orders
ORDER BY order_id ASC LIMIT 100
