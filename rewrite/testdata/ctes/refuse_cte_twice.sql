WITH o AS (SELECT * FROM orders) SELECT count(*) FROM o a JOIN o b ON a.customer_id = b.customer_id
