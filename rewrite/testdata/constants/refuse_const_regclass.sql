-- intent: a cast to regclass in a constant is refused: only casts to the totality table's scalar types are evaluated up front
SELECT count(*) FILTER (WHERE customer_id = 42 AND 'orders'::text::regclass IS NOT NULL) FROM orders
