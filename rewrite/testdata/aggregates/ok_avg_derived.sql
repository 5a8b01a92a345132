-- intent: count, sum and avg of the same column over the same rows: avg is derived from the released sum and count (post-processing), takes no share of ε and has no result columns of its own
SELECT region, count(amount), sum(amount), avg(amount) FROM orders GROUP BY region
