SELECT count(*) FROM orders WHERE amount / 0 > 1
