-- intent: pg_sequences is refused: sequence values count inserted rows
SELECT sequencename, last_value FROM pg_sequences
