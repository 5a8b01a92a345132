SELECT count(*) FILTER (WHERE customer_id = 42 AND 'orders'::text::regclass IS NOT NULL) FROM orders
