-- intent: pg_statistic is refused whatever its case and without a schema: it holds data values
select count(*) from PG_STATISTIC
