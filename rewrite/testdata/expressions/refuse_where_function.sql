-- intent: a function that can fail (length) on a private column in WHERE is refused
SELECT count(*) FROM orders WHERE length(email) > 3
