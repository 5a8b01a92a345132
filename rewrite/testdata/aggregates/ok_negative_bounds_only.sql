SELECT sum(discount), avg(discount) FROM ONLY public.orders
