-- intent: a LIKE pattern bound as a parameter (knex) is accepted, typed as a string and checked by the proxy before the charge, not refused at Parse
SELECT count(*) FROM orders WHERE email LIKE $1
