-- intent: a regular expression in HAVING would be matched against the column's statistics when the original statement is planned before the charge: refused
SELECT channel, count(*) FROM orders GROUP BY channel HAVING channel ~ 'e'
