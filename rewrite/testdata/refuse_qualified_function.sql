SELECT public.f()
