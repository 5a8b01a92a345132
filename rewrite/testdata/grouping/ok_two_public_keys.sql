-- intent: two public-valued keys need no partition selection: every released group is a pair of public values
SELECT region, channel, count(*) FROM orders GROUP BY 1, 2
