-- intent: comparing a numeric column with a float8 constant is refused: PostgreSQL's conversion can fail on some values
SELECT count(*) FROM orders WHERE amount > 1.5::float8
