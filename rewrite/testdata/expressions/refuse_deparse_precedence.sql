-- intent: a private query whose deparse would change its meaning (BETWEEN over a comparison) is refused, not rewritten wrongly
SELECT count(*) FROM orders WHERE (amount = 1) BETWEEN false AND true
