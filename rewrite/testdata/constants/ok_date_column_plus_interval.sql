-- intent: a date column plus an interval literal compared with current_date: the column is guarded at the ends of the range, current_date hoisted
SELECT count(*) FROM orders WHERE created_at + interval '7 days' >= current_date
