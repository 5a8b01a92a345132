SELECT pid, query FROM pg_stat_activity
