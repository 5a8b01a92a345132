-- intent: grouping by a public table's column is refused when the join is not many-to-one (the public side is not joined on a unique key)
SELECT p.category, count(*) FROM orders o JOIN products p ON p.category = o.region GROUP BY p.category
