-- intent: stddev is the square root of the released variance of the same form (sample), free; stddev_pop has no var_pop to come from and is noised itself
SELECT region, variance(amount), stddev(amount), stddev_pop(amount) FROM orders GROUP BY region
