SELECT "Weird Col", count(*) FROM orders GROUP BY "Weird Col" ORDER BY 1 DESC NULLS LAST
