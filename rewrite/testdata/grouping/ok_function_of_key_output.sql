-- intent: an output that is an allowed function of a group key (lower(region)) is computed after the release, from the released key
SELECT lower(region), count(*) FROM orders GROUP BY region
