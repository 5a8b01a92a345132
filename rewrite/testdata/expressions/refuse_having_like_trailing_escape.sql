-- intent: a LIKE in HAVING on a group key is planned before the charge, where PostgreSQL moves it into WHERE and matches it against the column's statistics: a pattern ending in the escape character is refused up front
SELECT channel, count(*) FROM orders GROUP BY channel HAVING channel LIKE '_e\'
