-- intent: discount may be NULL, so count(*) counts rows avg(discount) skips: avg is not derived from sum(discount)/count(*) and keeps its own count and share
SELECT count(*), sum(discount), avg(discount) FROM orders
