-- intent: a LIKE as a group key with a pattern computed from constants is hoisted and its value checked before the charge
SELECT channel LIKE 'w' || '%' AS k, count(*) FROM orders GROUP BY 1
