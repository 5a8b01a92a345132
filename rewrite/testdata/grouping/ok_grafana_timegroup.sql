-- intent: Grafana's $__timeGroup(ordered_at, 1h) expansion with the time alias, GROUP BY 1 ORDER BY 1: extract(epoch) is numeric (±Infinity for infinite values, carried without failing), divided by a non-zero constant and floored
SELECT floor(extract(epoch from ordered_at)/3600)*3600 AS "time", count(*) AS "count" FROM orders GROUP BY 1 ORDER BY 1
