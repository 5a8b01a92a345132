-- intent: pg_relation_size is refused: it reveals table sizes
SELECT pg_relation_size('orders')
