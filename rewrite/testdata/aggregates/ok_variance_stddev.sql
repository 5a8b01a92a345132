SELECT region, variance(amount), stddev_pop(amount) FROM orders GROUP BY region
