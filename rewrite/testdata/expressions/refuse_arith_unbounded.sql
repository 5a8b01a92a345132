-- intent: arithmetic on a column without bounds is refused: whether it overflows would depend on private values
SELECT sum(quantity * 2) FROM orders
