SELECT count(*) FROM (SELECT * FROM orders) s
