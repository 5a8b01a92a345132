SELECT count(*) FROM orders WHERE customer_id = 42 AND email LIKE 'a\'
