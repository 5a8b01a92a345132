-- intent: pg_stats is refused: it holds data values from tables
SELECT * FROM pg_stats
