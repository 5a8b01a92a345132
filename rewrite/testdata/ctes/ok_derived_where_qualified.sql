-- intent: a derived table with SELECT * and WHERE over the private table, then joined, keeps its WHERE qualified by the outer alias
SELECT p.category, sum(o.amount) FROM (SELECT * FROM orders WHERE product_id < 30) o JOIN products p ON p.product_id = o.product_id GROUP BY p.category
