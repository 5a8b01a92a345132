select count(*) from PG_STATISTIC
