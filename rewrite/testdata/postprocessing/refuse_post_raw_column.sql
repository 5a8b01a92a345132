-- intent: an output combining an aggregate with a raw ungrouped column is refused: the column would reveal rows
SELECT region, count(*) + amount FROM orders GROUP BY region
