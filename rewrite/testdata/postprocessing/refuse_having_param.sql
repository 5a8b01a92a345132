-- intent: a parameter in HAVING is refused: parameters are not supported over aggregates
SELECT region FROM orders GROUP BY region HAVING count(*) > $1
