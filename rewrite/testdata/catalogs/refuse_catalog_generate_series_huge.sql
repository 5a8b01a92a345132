-- intent: generate_series with literal bounds of more values than dpproxy's limit is refused before anything runs (54000): PostgreSQL would write its whole result to temporary files
SELECT count(*) FROM generate_series(1, 1e11)
