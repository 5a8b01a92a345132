-- intent: a Metabase question on a public table (binning with floor, a month breakout with date_trunc, a case-insensitive contains filter) passes through: the numeric and date functions hoisted constants may use are allowed on public tables
-- Metabase's query processor (src/metabase/driver/sql/query_processor.clj: binning
-- and :contains with case-sensitive false; src/metabase/driver/postgres.clj: date-trunc)
-- over the public table products.
SELECT ((FLOOR((("public"."products"."price" - 0.0) / 25.0)) * 25.0) + 0.0) AS "price", COUNT(*) AS "count" FROM "public"."products" WHERE LOWER("public"."products"."category") LIKE '%o%' GROUP BY ((FLOOR((("public"."products"."price" - 0.0) / 25.0)) * 25.0) + 0.0) ORDER BY ((FLOOR((("public"."products"."price" - 0.0) / 25.0)) * 25.0) + 0.0) ASC;
SELECT CAST(DATE_TRUNC('month', now()) AS date) AS "month", ROUND(AVG("public"."products"."price"), 2) AS "avg", CAST(EXTRACT(month FROM now()) AS integer) AS "moy" FROM "public"."products"
