-- intent: a LIKE pattern computed from a parameter ('%' || $1 || '%', lower($1)) is hoisted, evaluated and checked before the charge
SELECT count(*) FROM orders WHERE email LIKE '%' || $1 || '%' AND lower(region) LIKE lower($2)
