SELECT count(*) FROM orders WHERE note LIKE '100\%'
