-- intent: IN lists of constants and ILIKE with a constant pattern are allowed in WHERE, and ORDER BY ... NULLS FIRST is applied after the release
SELECT status, count(*) FROM orders WHERE status IN ('paid', 'shipped') AND email ILIKE '%@example.com' GROUP BY status ORDER BY status NULLS FIRST
