SELECT count(*) FROM (SELECT * FROM orders LIMIT 10) t
