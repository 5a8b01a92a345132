-- intent: table.* of the private table next to an aggregate is refused: it returns individual rows
SELECT o.*, count(*) FROM orders o
