-- intent: adding an interval whose size could carry a date out of the timestamp range is refused
SELECT count(*) FROM orders WHERE created_at + interval '3000 years' > '2024-01-01'
