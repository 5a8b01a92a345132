SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY amount), percentile_disc(0.9) WITHIN GROUP (ORDER BY amount DESC) FROM orders
