-- intent: window functions over the private table are refused
SELECT count(*) OVER () FROM orders
