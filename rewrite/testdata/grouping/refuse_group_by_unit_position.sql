-- intent: GROUP BY the privacy unit through its output position is refused like GROUP BY the column
SELECT customer_id, count(*) FROM orders GROUP BY 1
