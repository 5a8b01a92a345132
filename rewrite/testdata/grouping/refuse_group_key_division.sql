-- intent: division in a group key is refused: a zero or overflowing divisor would fail on private values
SELECT amount / 10, count(*) FROM orders GROUP BY 1
