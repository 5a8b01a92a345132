-- intent: grouping by a column of a table not configured public is refused: it cannot be joined with a private table
SELECT c.region, count(*) FROM orders o JOIN customers c ON c.customer_id = o.customer_id GROUP BY c.region
