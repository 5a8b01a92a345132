-- intent: a LIKE pattern that is a parameter cast to bpchar is hoisted with type bpchar, which the pattern check refuses before the charge (its trailing spaces would go when it becomes text)
SELECT count(*) FROM orders WHERE region LIKE $1::bpchar
