-- intent: parameters in WHERE stay parameters; a cast of one ($1::date) becomes a constant evaluated up front, each type-checked against the column it is compared with
SELECT region, sum(amount) FROM orders WHERE created_at >= $1::date AND amount < $2 GROUP BY region
