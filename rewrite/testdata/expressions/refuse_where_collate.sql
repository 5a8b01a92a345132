SELECT count(*) FROM orders WHERE region = 'a' COLLATE "C"
