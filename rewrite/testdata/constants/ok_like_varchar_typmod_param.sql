-- intent: a LIKE pattern that is a parameter cast to varchar(n) is hoisted: the truncated value is what is checked
SELECT count(*) FROM orders WHERE region LIKE $1::varchar(2)
