-- intent: date_part of a date column is refused: it converts to timestamp, which fails beyond 294276 AD (extract does not)
SELECT date_part('year', created_at) AS y, count(*) FROM orders GROUP BY 1
