-- intent: pg_stat_activity is refused: it shows other sessions' queries
SELECT pid, query FROM pg_stat_activity
