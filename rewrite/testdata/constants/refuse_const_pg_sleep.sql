-- intent: a constant with a side effect (pg_sleep) is refused: constants are evaluated before any row is read
SELECT count(CASE WHEN customer_id = 42 THEN pg_sleep(1) END) FROM orders
