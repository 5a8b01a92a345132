-- intent: a negative OFFSET is refused with PostgreSQL's SQLSTATE
SELECT count(*) FROM orders OFFSET -1
