-- intent: Grafana's template-variable query, SELECT DISTINCT ... WHERE ... ORDER BY 1, is answered by partition selection with the order applied to the released keys
SELECT DISTINCT product_id FROM orders WHERE amount > 10 ORDER BY 1
