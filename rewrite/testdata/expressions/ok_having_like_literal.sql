-- intent: a valid literal LIKE pattern in HAVING on a group key is post-processing of released keys: accepted
SELECT channel, count(*) FROM orders GROUP BY channel HAVING channel LIKE 'w%'
