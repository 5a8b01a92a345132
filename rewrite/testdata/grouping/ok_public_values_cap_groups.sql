-- intent: keys whose public values make at most max_groups_per_unit combinations (region: 4 values, L0 = 4) need no ranking of a unit's groups: the per-unit rows are grouped directly, with the same bounds
SELECT region, count(*), sum(amount) FROM orders GROUP BY region
