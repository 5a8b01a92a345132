-- intent: Metabase's download of a raw question (LIMIT 1048575) is refused as row-level, with the Metabase hint
SELECT "public"."orders"."region" AS "region", "public"."orders"."amount" AS "amount" FROM "public"."orders" WHERE "public"."orders"."amount" > 100 LIMIT 1048575
