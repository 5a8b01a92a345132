-- intent: a three-part name of a public table in the current database passes through, printed without the database
SELECT name FROM shop.public.products WHERE product_id = 1
