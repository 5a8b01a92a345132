WITH big AS (SELECT customer_id, amount AS amt, region FROM orders WHERE amount > 100) SELECT region, avg(amt) FROM big GROUP BY region
