-- intent: a LIKE pattern in HAVING must be a literal: one computed from constants is not checked there, so it is refused
SELECT channel, count(*) FROM orders GROUP BY channel HAVING channel LIKE '_e' || '\'
