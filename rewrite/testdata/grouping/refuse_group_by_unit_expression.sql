-- intent: an arithmetic expression of the privacy unit as a group key is refused (the unit has no bounds)
SELECT customer_id + 1, count(*) FROM orders GROUP BY 1
