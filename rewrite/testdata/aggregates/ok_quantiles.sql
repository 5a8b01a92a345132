-- intent: percentile_cont and percentile_disc DESC (as 1 - q) of one column share one sparse 4096-bucket histogram (rows per unit and bucket, merged into the group's row as {bucket, count} pairs) for the exponential mechanism
SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY amount), percentile_disc(0.9) WITHIN GROUP (ORDER BY amount DESC) FROM orders
