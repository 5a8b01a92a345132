-- intent: sum and avg over a column with a negative lower bound clamp both sides, under ONLY and a qualified name
SELECT sum(discount), avg(discount) FROM ONLY public.orders
