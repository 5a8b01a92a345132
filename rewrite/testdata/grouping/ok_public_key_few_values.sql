-- intent: a public-valued key with quotes and backslashes in its values is filtered to them, and max_groups is the number of values
SELECT channel, count(*) FROM orders GROUP BY channel
