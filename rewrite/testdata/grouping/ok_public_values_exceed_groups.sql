-- intent: keys whose public values make more combinations than max_groups_per_unit (region × channel: 12 > 4) still rank each unit's groups and keep 4
SELECT region, channel, count(*) FROM orders GROUP BY region, channel
