-- intent: a regular expression operator on the private table is refused
SELECT count(*) FROM orders WHERE email ~ '^a'
