-- intent: a constant in a join condition is evaluated up front and type-checked against the column it is compared with
SELECT count(*) FROM orders o JOIN products p ON p.product_id = o.product_id AND o.ordered_at > 'x'::text::timestamptz WHERE p.category = 'kitchen'
