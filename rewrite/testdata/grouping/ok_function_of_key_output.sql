SELECT lower(region), count(*) FROM orders GROUP BY region
