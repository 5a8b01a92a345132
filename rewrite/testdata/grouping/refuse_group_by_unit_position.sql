SELECT customer_id, count(*) FROM orders GROUP BY 1
