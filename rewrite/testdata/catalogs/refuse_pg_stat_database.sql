-- intent: pg_stat_database is refused: it holds row counts
SELECT datname, tup_returned FROM pg_stat_database
