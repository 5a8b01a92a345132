SELECT count(*) FROM orders WHERE email LIKE $1
