-- intent: percentile_cont and percentile_disc DESC (as 1 - q) become a bounded 64-bucket per-unit histogram for the exponential mechanism
SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY amount), percentile_disc(0.9) WITHIN GROUP (ORDER BY amount DESC) FROM orders
