-- intent: a function not on the allowlist (pg_sleep) applied to a noisy aggregate is refused
SELECT region, pg_sleep(count(*)) FROM orders GROUP BY region
