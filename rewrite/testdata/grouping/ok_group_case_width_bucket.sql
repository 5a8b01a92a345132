-- intent: CASE, width_bucket and extract as group keys are allowed (they cannot fail on any value) and need partition selection
SELECT CASE WHEN amount < 100 THEN 'small' ELSE 'large' END AS size, width_bucket(amount, 0, 500, 5), extract(year FROM ordered_at), count(*) FROM orders GROUP BY 1, 2, 3
