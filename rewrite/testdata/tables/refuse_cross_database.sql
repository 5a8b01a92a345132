-- intent: a three-part name naming another database is refused
SELECT * FROM otherdb.public.products
