-- intent: a constant that fails ('x'::text::date) is evaluated before any row is read and bound as a parameter, so a filter on one customer cannot turn its error into a signal
SELECT count(*) FILTER (WHERE customer_id = 42 AND created_at > 'x'::text::date) FROM orders
