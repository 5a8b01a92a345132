-- intent: variance (sample) and stddev_pop each need their own clamped count, sum and sum of squares columns
SELECT region, variance(amount), stddev_pop(amount) FROM orders GROUP BY region
