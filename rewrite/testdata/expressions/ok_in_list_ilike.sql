SELECT status, count(*) FROM orders WHERE status IN ('paid', 'shipped') AND email ILIKE '%@example.com' GROUP BY status ORDER BY status NULLS FIRST
