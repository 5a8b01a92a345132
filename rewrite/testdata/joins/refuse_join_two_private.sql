SELECT count(*) FROM orders o JOIN sales.visits v ON v.user_id = o.customer_id
