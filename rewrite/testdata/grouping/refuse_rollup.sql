SELECT region, count(*) FROM orders GROUP BY ROLLUP (region)
