-- intent: sum of a column without configured bounds is refused
SELECT sum(quantity) FROM orders
