-- intent: a bounds: auto column with a public-values key and FILTER: the public-values filter applies to the histogram too
SELECT region, sum(score) FILTER (WHERE quantity > 2) FROM orders GROUP BY region
