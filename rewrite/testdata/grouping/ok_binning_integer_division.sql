-- intent: binning an integer column: PostgreSQL's integer division is printed as div() over numeric, the same quotient, total for a non-zero divisor
SELECT floor((duration - 0) / 60) * 60 AS b, count(*) FROM sales.visits GROUP BY 1
