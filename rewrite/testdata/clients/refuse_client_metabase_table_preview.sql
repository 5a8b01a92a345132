-- intent: Metabase's table preview (every column "schema"."table"."col" AS "col", LIMIT 2000) is refused as row-level, with a hint naming Metabase's Summarize and Table Metadata settings
-- Metabase's query processor (src/metabase/driver/sql/query_processor.clj) for a
-- raw-data question on orders; LIMIT 2000 is the table view's row limit
-- (src/metabase/query_processor/middleware/constraints.clj).
SELECT "public"."orders"."order_id" AS "order_id", "public"."orders"."customer_id" AS "customer_id", "public"."orders"."region" AS "region", "public"."orders"."amount" AS "amount", "public"."orders"."ordered_at" AS "ordered_at" FROM "public"."orders" LIMIT 2000
