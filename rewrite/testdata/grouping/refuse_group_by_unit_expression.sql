SELECT customer_id + 1, count(*) FROM orders GROUP BY 1
