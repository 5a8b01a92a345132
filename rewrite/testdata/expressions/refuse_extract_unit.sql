-- intent: extract of a unit invalid for a date column (hour) is refused: it would fail on the column's values
SELECT extract(hour FROM created_at), count(*) FROM orders GROUP BY 1
