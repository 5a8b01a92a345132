-- intent: a filtered CTE on the nullable side of an outer join with USING is refused: its WHERE needs an ON condition to hold it
WITH c AS (SELECT product_id, category FROM products WHERE category = 'audio') SELECT count(*) FROM orders LEFT JOIN c USING (product_id)
