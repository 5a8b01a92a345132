-- intent: a pass-through query whose deparse would change its meaning (BETWEEN over a comparison) is refused, not sent altered
SELECT (0 = 0) BETWEEN 0 AND 0
