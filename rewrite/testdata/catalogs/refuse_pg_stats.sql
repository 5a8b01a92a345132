SELECT * FROM pg_stats
