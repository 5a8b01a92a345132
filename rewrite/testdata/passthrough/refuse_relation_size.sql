SELECT pg_relation_size('orders')
