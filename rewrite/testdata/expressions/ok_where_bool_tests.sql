-- intent: IS TRUE, OR, <>, NOT BETWEEN, constant arithmetic and a DATE literal are allowed in WHERE
SELECT count(*) FROM orders WHERE (paid IS TRUE OR amount >= 10 + 5) AND region <> 'x' AND amount NOT BETWEEN -1 AND 1e6 AND created_at < DATE '2024-01-01'
