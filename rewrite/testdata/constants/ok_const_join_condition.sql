SELECT count(*) FROM orders o JOIN products p ON p.product_id = o.product_id AND o.ordered_at > 'x'::text::timestamptz WHERE p.category = 'kitchen'
