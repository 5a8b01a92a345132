SELECT count(*) FROM orders WHERE (amount = 1) BETWEEN false AND true
