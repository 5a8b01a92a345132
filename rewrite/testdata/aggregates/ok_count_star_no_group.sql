-- intent: the simplest private query: an ungrouped count(*) reads the table once per unit and clamps each person's rows to max_rows_per_unit
SELECT count(*) FROM orders
