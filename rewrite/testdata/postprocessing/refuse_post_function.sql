SELECT region, pg_sleep(count(*)) FROM orders GROUP BY region
