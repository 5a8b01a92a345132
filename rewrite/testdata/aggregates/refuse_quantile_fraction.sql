-- intent: percentile_cont with a non-constant fraction is refused
SELECT percentile_cont(amount) WITHIN GROUP (ORDER BY amount) FROM orders
