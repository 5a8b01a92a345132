SELECT count(*) FROM orders LIMIT $1
