-- intent: variance needs configured bounds: bounds: auto is for SUM and AVG
SELECT stddev(score) FROM orders
