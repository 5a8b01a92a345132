-- intent: pg_stat_user_tables is read through a subquery whose tuple counts are masked
SELECT n_live_tup FROM pg_catalog.pg_stat_user_tables
