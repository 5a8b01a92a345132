SELECT count(*) FROM orders WHERE email ~ '^a'
