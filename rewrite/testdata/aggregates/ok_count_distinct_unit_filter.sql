-- intent: count(DISTINCT privacy_unit) FILTER counts the persons with a matching row, at most one each
SELECT count(DISTINCT customer_id) FILTER (WHERE amount > 100) FROM orders
