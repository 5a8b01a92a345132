-- intent: arithmetic on a parameter (not on a column) in WHERE is computed up front as a new parameter, type-checked against the column
SELECT count(*) FROM orders WHERE amount > $1 + 1
