-- intent: public tables joined ON true (a fan-out multiplying each private row) are refused
SELECT count(*) FROM orders o JOIN products c1 ON o.customer_id = 42 JOIN products c2 ON true JOIN products c3 ON true JOIN products c4 ON true JOIN products c5 ON true
