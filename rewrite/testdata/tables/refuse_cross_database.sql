SELECT * FROM otherdb.public.products
