-- intent: GROUP BY ROLLUP is refused: grouping sets are not supported on private tables
SELECT region, count(*) FROM orders GROUP BY ROLLUP (region)
