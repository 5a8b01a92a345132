SELECT count(*) FROM orders WHERE amount = ANY('{1,2}')
