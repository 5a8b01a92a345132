-- intent: a key that is a column of a public table joined on its primary key releases every value of that column (read before the charge), with no partition selection
SELECT p.category, count(*), sum(o.amount) FROM orders o JOIN products p ON p.product_id = o.product_id GROUP BY p.category
