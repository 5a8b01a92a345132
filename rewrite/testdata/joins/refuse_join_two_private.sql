-- intent: joining two private tables is refused: each person's rows in both would have to be bounded together
SELECT count(*) FROM orders o JOIN sales.visits v ON v.user_id = o.customer_id
