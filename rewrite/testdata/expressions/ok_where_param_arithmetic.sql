SELECT count(*) FROM orders WHERE amount > $1 + 1
