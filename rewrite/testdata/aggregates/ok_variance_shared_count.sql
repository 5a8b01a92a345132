-- intent: variance divides by the released count(amount) of the same rows (no count of its own: its two sums get half its share each), and stddev is the square root of that variance, free
SELECT region, count(amount), variance(amount), stddev(amount) FROM orders GROUP BY region
