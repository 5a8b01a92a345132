-- intent: a cast that keeps the literal's value (2::numeric, 4::int4) still counts as that constant divisor
SELECT sum(amount / 2::numeric) AS s, sum(amount / 4::int4) AS q FROM orders
