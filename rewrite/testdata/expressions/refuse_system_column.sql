SELECT count(*) FROM orders WHERE ctid = '(0,1)'
