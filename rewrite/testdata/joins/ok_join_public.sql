-- intent: an inner join of the private table to a public table on its primary key is accepted
SELECT count(*) FROM orders o JOIN products p ON p.id = o.product_id
