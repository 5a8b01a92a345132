-- intent: a LIKE pattern from a column is refused: an invalid pattern would fail depending on private values
SELECT count(*) FROM orders WHERE email LIKE region
