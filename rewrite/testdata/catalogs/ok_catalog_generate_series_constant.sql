-- intent: generate_series with constant bounds passes through in a statement that reads no private table (its time is bounded by limits.statement_timeout)
SELECT i, (current_schemas(false))[i] FROM generate_series(1, 3) AS i
