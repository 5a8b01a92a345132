-- intent: now() and current_date alone, and current_date - 30, as analysts type them: hoisted and bound
SELECT count(*) FROM orders WHERE ordered_at < now() AND created_at <= current_date AND created_at > current_date - 30
