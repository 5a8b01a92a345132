SELECT region, sum(amount) FROM orders WHERE created_at >= $1::date AND amount < $2 GROUP BY region
