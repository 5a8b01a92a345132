-- intent: sum with WHERE equality and BETWEEN on the summed column keeps the column's configured bounds
SELECT sum(amount) FROM orders WHERE region = 'north' AND amount BETWEEN 1 AND 100
