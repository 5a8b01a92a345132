SELECT percentile_cont(amount) WITHIN GROUP (ORDER BY amount) FROM orders
