-- intent: a group key floor(discount * discount) over an unconstrained numeric: both operands clamped to the configured bounds before the product (a huge value would overflow numeric in the key, only for that person's rows)
SELECT floor(discount * discount) AS k, count(*) FROM orders GROUP BY 1
