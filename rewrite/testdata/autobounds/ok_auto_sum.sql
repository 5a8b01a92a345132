-- intent: SUM of a bounds: auto column: a histogram query over the contribution-bounded rows, the main query clamped to ±2^63 until the bounds are chosen
SELECT sum(score) FROM orders
