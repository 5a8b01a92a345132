SELECT datname, tup_returned FROM pg_stat_database
