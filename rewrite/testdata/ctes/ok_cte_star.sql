WITH o AS (SELECT * FROM orders) SELECT count(*) FROM o
