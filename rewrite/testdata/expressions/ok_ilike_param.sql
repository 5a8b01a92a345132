-- intent: ILIKE with a bound pattern, as query builders send it: checked at execution before the charge
SELECT count(*) FROM orders WHERE email ILIKE $1
