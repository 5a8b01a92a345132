-- intent: a cast of a text column to int in WHERE is refused: it can fail depending on private values
SELECT count(*) FROM orders WHERE region::int > 3
