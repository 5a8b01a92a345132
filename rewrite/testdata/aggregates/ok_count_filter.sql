-- intent: count(*) FILTER (WHERE ...) keeps the filter in the per-unit pre-aggregation, with the row count clamped by max_rows_per_unit
SELECT count(*) FILTER (WHERE amount > 3) FROM orders
