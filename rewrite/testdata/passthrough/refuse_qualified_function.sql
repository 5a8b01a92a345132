-- intent: a function outside pg_catalog is refused: it could be anything
SELECT public.f()
