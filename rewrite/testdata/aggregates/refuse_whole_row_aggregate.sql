-- intent: an aggregate of a whole-row reference to the private table is refused: it would return rows
SELECT count(o) FROM orders o
