-- intent: a three-part name naming another database is refused with PostgreSQL's wording and code
SELECT * FROM otherdb.public.products
