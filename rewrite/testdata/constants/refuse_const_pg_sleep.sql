SELECT count(CASE WHEN customer_id = 42 THEN pg_sleep(1) END) FROM orders
