-- intent: a CTE that filters and renames a private column is inlined, and AVG over the renamed column gets the original column's bounds
WITH big AS (SELECT customer_id, amount AS amt, region FROM orders WHERE amount > 100) SELECT region, avg(amt) FROM big GROUP BY region
