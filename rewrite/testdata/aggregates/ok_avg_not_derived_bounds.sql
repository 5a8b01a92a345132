-- intent: avg(amount + 10) has bounds [10, 510], which do not hold zero: a sum over them is noisier than avg's sum centred on the middle, so avg keeps its own share instead of being derived from sum and count; it divides by the released count of the same rows, and its centred sum gets the whole share
SELECT count(amount + 10), sum(amount + 10), avg(amount + 10) FROM orders
