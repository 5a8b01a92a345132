-- intent: psqlODBC names every table database.schema.table: a three-part name naming the current database is the table itself, private or public
SELECT count(*) FROM shop.public.orders
