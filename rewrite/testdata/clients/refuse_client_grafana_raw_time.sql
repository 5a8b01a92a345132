-- intent: a Grafana panel returning raw rows ($__time(col) expands to col AS "time") is refused as row-level, with a hint naming $__timeGroupAlias and the builder's Aggregation
-- Grafana's macros (pkg/tsdb/grafana-postgresql-datasource/macros.go): $__time(ordered_at)
-- and $__timeFilter(ordered_at) expanded.
SELECT ordered_at AS "time", amount FROM orders WHERE ordered_at BETWEEN '2024-01-01T00:00:00Z' AND '2024-02-01T00:00:00Z' ORDER BY 1
