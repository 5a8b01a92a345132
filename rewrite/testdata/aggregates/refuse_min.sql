-- intent: min is refused: one person's value would decide it; the hint points to percentile_cont
SELECT min(amount) FROM orders
