-- intent: a LIMIT 0 column probe of a private table is refused as row-level, with the probe hint
SELECT * FROM public.orders LIMIT 0
