SELECT count(*) FILTER (WHERE customer_id = 42 AND created_at > 'x'::text::date) FROM orders
