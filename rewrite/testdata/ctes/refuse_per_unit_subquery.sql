SELECT avg(n) FROM (SELECT customer_id, count(*) n FROM orders GROUP BY customer_id) t
