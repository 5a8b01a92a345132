-- intent: a divisor that is a column is refused: a zero would fail depending on private values
SELECT floor(extract(epoch FROM ordered_at) / amount) * 60 AS b, count(*) FROM orders GROUP BY 1
