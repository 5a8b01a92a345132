SELECT count(*) FROM orders WHERE email LIKE region
