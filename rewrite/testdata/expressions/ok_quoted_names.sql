-- intent: quoted mixed-case column names stay quoted in the rewrite, and ORDER BY ... NULLS LAST is applied after the release
SELECT "Weird Col", count(*) FROM orders GROUP BY "Weird Col" ORDER BY 1 DESC NULLS LAST
