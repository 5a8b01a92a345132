-- intent: the same through USING and an unqualified key column, with AVG: no partition selection
SELECT category, avg(amount) FROM orders JOIN products USING (product_id) GROUP BY category
