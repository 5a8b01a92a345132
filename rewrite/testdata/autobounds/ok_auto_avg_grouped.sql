-- intent: AVG and SUM of one bounds: auto column with GROUP BY and WHERE: one histogram for all groups, each unit keeping max_groups_per_unit groups as in the main query
SELECT channel, avg(score), sum(score), count(*) FROM orders WHERE quantity > 1 GROUP BY channel
