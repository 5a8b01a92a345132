-- intent: a constant LIKE pattern ending with the escape character is refused up front, as PostgreSQL would fail on it
SELECT count(*) FROM orders WHERE customer_id = 42 AND email LIKE 'a\'
