-- intent: a column probe over a private table (SELECT * ... WHERE 1=0, Tableau's and Power BI's) is refused as row-level, with a hint that the tool falls back to the catalog and to stay Live/DirectQuery
SELECT * FROM "public"."orders" "orders" WHERE (1 = 0)
