SELECT count(*) FROM orders WHERE region::int > 3
