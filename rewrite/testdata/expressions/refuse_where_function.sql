SELECT count(*) FROM orders WHERE length(email) > 3
