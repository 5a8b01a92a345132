-- intent: Grafana's query builder before an aggregation is chosen (SELECT col FROM t LIMIT 50) is refused as row-level, with the data viewer hint
SELECT channel FROM orders LIMIT 50
