-- intent: a LIKE pattern cast to varchar(n) is not the text PostgreSQL matches ('a\b'::varchar(2) is 'a\'), so it is refused, not checked as written
SELECT count(*) FROM orders WHERE customer_id = 42 AND region LIKE 'a\b'::varchar(2)
