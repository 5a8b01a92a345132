-- intent: a derived table that aggregates per person is refused: the outer aggregate would need bounds on per-person values
SELECT avg(n) FROM (SELECT customer_id, count(*) n FROM orders GROUP BY customer_id) t
