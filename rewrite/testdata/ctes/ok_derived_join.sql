-- intent: a derived table that joins the private table to a public one is inlined, its columns resolved through the join
SELECT t.category, count(*) FROM (SELECT o.amount, p.category FROM orders o JOIN products p ON p.product_id = o.product_id) t GROUP BY t.category
