-- intent: division on a column in WHERE is refused: division errors would depend on private values
SELECT count(*) FROM orders WHERE amount / 0 > 1
