-- intent: percentiles need configured bounds: bounds: auto is for SUM and AVG
SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY score) FROM orders
