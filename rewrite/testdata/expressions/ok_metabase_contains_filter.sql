-- intent: Metabase's default case-insensitive contains filter: lower(col) LIKE a constant pattern
SELECT count(*) AS "count" FROM "public"."orders" WHERE (lower("public"."orders"."email") LIKE '%gmail%')
