-- intent: a row-level read no tool shape matches keeps the generic hint
SELECT amount FROM orders WHERE amount > 10
