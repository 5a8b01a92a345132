-- intent: a filtered public CTE on the nullable side of a LEFT JOIN keeps its WHERE in the ON condition, so no private row is dropped
WITH c AS (SELECT product_id, category FROM products WHERE category = 'audio') SELECT c.category, count(*) FROM orders o LEFT JOIN c ON c.product_id = o.product_id GROUP BY c.category
