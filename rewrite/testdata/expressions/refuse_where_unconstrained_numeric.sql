-- intent: an unconstrained numeric column can hold values whose product overflows numeric: arithmetic on it in a condition is refused
SELECT count(*) FROM orders WHERE discount * quantity > 100
