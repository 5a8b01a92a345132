-- intent: a constant expression over a parameter inside a group key is computed once and passed as a new parameter, and the key still goes through partition selection
SELECT CASE WHEN channel = 'web' THEN date_trunc('day', $1::text::timestamptz) END AS k, count(*) FROM orders GROUP BY 1
