-- intent: three branches share the client's parameters; each branch's hoisted constants are numbered after all of them
SELECT count(*) FROM orders WHERE amount > $1 UNION ALL SELECT count(*) FROM orders WHERE amount > $2 + 1 UNION ALL SELECT sum(amount) FROM orders
