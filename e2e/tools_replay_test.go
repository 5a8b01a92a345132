package e2e

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The SQL of the analysts' tools that cannot be installed here (Metabase,
// Grafana, Superset, Tableau, Power BI and Excel over psqlODBC, DBeaver,
// pgAdmin), replayed through the proxy (issue 14, item 7). Each case is
// the SQL a tool generates, derived from the tool's own source (cited by
// repository and file), with the shop schema's tables and columns put in
// and the shape kept: schema discovery, field values, time series,
// binning, filters, the query builder and the row-level reads a DP proxy
// must refuse. docs/bi-tools.md states, per tool, what these cases show.

// toolCase is one replayed statement.
type toolCase struct {
	tool   string // Metabase, Grafana, Superset, Tableau, Power BI/Excel, DBeaver, pgAdmin
	step   string // what the tool is doing
	source string // repository: file the shape comes from
	sql    string // {db} is replaced with the database's name
	args   []any  // bound parameters (extended protocol) when not nil
	// refused is "" when the statement must be answered, else the
	// SQLSTATEs it may be refused with; hint is then a part of the
	// refusal's hint naming the tool's setting ("" when none is asked).
	refused, hint string
	minRows       int // answered: at least this many rows
}

const (
	srcMetabasePostgres = "metabase/metabase: src/metabase/driver/postgres.clj"
	srcMetabaseQP       = "metabase/metabase: src/metabase/driver/sql/query_processor.clj"
	srcMetabaseMeta     = "metabase/metabase: src/metabase/db/metadata_queries.clj"
	srcMetabaseLimits   = "metabase/metabase: src/metabase/query_processor/middleware/constraints.clj"
	srcGrafanaMacros    = "grafana/grafana: pkg/tsdb/grafana-postgresql-datasource/macros.go"
	srcGrafanaMeta      = "grafana/grafana: public/app/plugins/datasource/grafana-postgresql-datasource/postgresMetaQuery.ts"
	srcGrafanaBuilder   = "grafana/grafana: public/app/plugins/datasource/grafana-postgresql-datasource/sqlUtil.ts (toRawSql)"
	srcSupersetPG       = "apache/superset: superset/db_engine_specs/postgres.py"
	srcSupersetBase     = "apache/superset: superset/db_engine_specs/base.py"
	srcSupersetModels   = "apache/superset: superset/connectors/sqla/models.py"
	srcSQLAlchemy       = "sqlalchemy/sqlalchemy: lib/sqlalchemy/dialects/postgresql/base.py (PGInspector)"
	srcPsqlODBC         = "postgresql-interfaces/psqlodbc: info.c (PGAPI_Tables, PGAPI_Columns)"
	srcTableauDialect   = "tableau/connector-plugin-sdk: samples/plugins/postgres_odbc/dialect.tdd"
	srcPgAdmin          = "pgadmin-org/pgadmin4: web/pgadmin/tools/sqleditor/ (View Data: First 100 Rows), web/pgadmin/dashboard/templates/dashboard/sql/"
	srcDBeaver          = "dbeaver/dbeaver: plugins/org.jkiss.dbeaver.ext.postgresql (data tab, row count)"
)

var toolCases = []toolCase{
	// ---- Metabase ----
	{tool: "Metabase", step: "schema discovery: describe-fields", source: srcMetabasePostgres, minRows: 8,
		sql: `SELECT "c"."column_name" AS "name", CASE WHEN "c"."udt_schema" IN ('public', 'pg_catalog') THEN FORMAT('%s', "c"."udt_name") ELSE FORMAT('"%s"."%s"', "c"."udt_schema", "c"."udt_name") END AS "database-type", "c"."ordinal_position" - 1 AS "database-position", "c"."table_schema" AS "table-schema", "c"."table_name" AS "table-name", "pk"."column_name" IS NOT NULL AS "pk?", COL_DESCRIPTION(CAST(CAST(FORMAT('%I.%I', CAST("c"."table_schema" AS TEXT), CAST("c"."table_name" AS TEXT)) AS REGCLASS) AS OID), "c"."ordinal_position") AS "field-comment", (("column_default" IS NULL) OR (LOWER("column_default") = 'null')) AND ("is_nullable" = 'NO') AND NOT ((("column_default" IS NOT NULL) AND ("column_default" LIKE '%nextval(%')) OR ("is_identity" <> 'NO')) AS "database-required", (("column_default" IS NOT NULL) AND ("column_default" LIKE '%nextval(%')) OR ("is_identity" <> 'NO') AS "database-is-auto-increment" FROM "information_schema"."columns" AS "c" LEFT JOIN (SELECT "tc"."table_schema", "tc"."table_name", "kc"."column_name" FROM "information_schema"."table_constraints" AS "tc" INNER JOIN "information_schema"."key_column_usage" AS "kc" ON ("tc"."constraint_name" = "kc"."constraint_name") AND ("tc"."table_schema" = "kc"."table_schema") AND ("tc"."table_name" = "kc"."table_name") WHERE "tc"."constraint_type" = 'PRIMARY KEY') AS "pk" ON ("c"."table_schema" = "pk"."table_schema") AND ("c"."table_name" = "pk"."table_name") AND ("c"."column_name" = "pk"."column_name") WHERE c.table_schema !~ '^information_schema|catalog_history|pg_' AND ("c"."table_schema" IN ('public')) AND ("c"."table_name" IN ('orders')) ORDER BY "table-schema" ASC, "table-name" ASC, "database-position" ASC`},
	{tool: "Metabase", step: "schema discovery: describe-fks", source: srcMetabasePostgres, minRows: 2,
		sql: `SELECT "fk_ns"."nspname" AS "fk-table-schema", "fk_table"."relname" AS "fk-table-name", "fk_column"."attname" AS "fk-column-name", "pk_ns"."nspname" AS "pk-table-schema", "pk_table"."relname" AS "pk-table-name", "pk_column"."attname" AS "pk-column-name" FROM "pg_constraint" AS "c" INNER JOIN "pg_class" AS "fk_table" ON "c"."conrelid" = "fk_table"."oid" INNER JOIN "pg_namespace" AS "fk_ns" ON "c"."connamespace" = "fk_ns"."oid" INNER JOIN "pg_attribute" AS "fk_column" ON "c"."conrelid" = "fk_column"."attrelid" INNER JOIN "pg_class" AS "pk_table" ON "c"."confrelid" = "pk_table"."oid" INNER JOIN "pg_namespace" AS "pk_ns" ON "pk_table"."relnamespace" = "pk_ns"."oid" INNER JOIN "pg_attribute" AS "pk_column" ON "c"."confrelid" = "pk_column"."attrelid" WHERE (fk_ns.nspname !~ '^information_schema|catalog_history|pg_') AND ("c"."contype" = 'f'::char) AND ("fk_column"."attnum" = ANY(c.conkey)) AND ("pk_column"."attnum" = ANY(c.confkey)) AND ("fk_table"."relname" IN ('orders')) AND ("fk_ns"."nspname" IN ('public')) ORDER BY "fk-table-schema" ASC, "fk-table-name" ASC`},
	{tool: "Metabase", step: "table preview (raw data, 2000 rows)", source: srcMetabaseQP + "; " + srcMetabaseLimits,
		sql:     `SELECT "public"."orders"."order_id" AS "order_id", "public"."orders"."customer_id" AS "customer_id", "public"."orders"."region" AS "region", "public"."orders"."amount" AS "amount", "public"."orders"."ordered_at" AS "ordered_at" FROM "public"."orders" LIMIT 2000`,
		refused: "42501", hint: "Summarize"},
	{tool: "Metabase", step: "download of a raw question (1048575 rows)", source: srcMetabaseQP + "; " + srcMetabaseLimits,
		sql:     `SELECT "public"."orders"."region" AS "region", "public"."orders"."amount" AS "amount" FROM "public"."orders" WHERE "public"."orders"."amount" > 100 LIMIT 1048575`,
		refused: "42501", hint: "Summarize"},
	{tool: "Metabase", step: "sync: sample rows for fingerprints", source: srcMetabaseMeta + " (table-rows-sample)",
		sql:     `SELECT "public"."orders"."amount" AS "amount", "public"."orders"."channel" AS "channel" FROM "public"."orders" LIMIT 10000`,
		refused: "42501", hint: "Plain input box"},
	{tool: "Metabase", step: "field values (distinct values of a column)", source: srcMetabaseMeta + " (field-distinct-values)", minRows: 1,
		sql: `SELECT "public"."orders"."channel" AS "channel" FROM "public"."orders" GROUP BY "public"."orders"."channel" ORDER BY "public"."orders"."channel" ASC LIMIT 1000`},
	{tool: "Metabase", step: "query builder: Summarize Count and Sum by region", source: srcMetabaseQP, minRows: 4,
		sql: `SELECT "public"."orders"."region" AS "region", COUNT(*) AS "count", SUM("public"."orders"."amount") AS "sum" FROM "public"."orders" GROUP BY "public"."orders"."region" ORDER BY "public"."orders"."region" ASC`},
	{tool: "Metabase", step: "query builder: Number of distinct customers", source: srcMetabaseQP, minRows: 1,
		sql: `SELECT COUNT(DISTINCT "public"."orders"."customer_id") AS "count" FROM "public"."orders"`},
	{tool: "Metabase", step: "time series: by month of a timestamptz", source: srcMetabasePostgres + " (date-trunc)", minRows: 1,
		sql: `SELECT DATE_TRUNC('month', "public"."orders"."ordered_at") AS "ordered_at", COUNT(*) AS "count" FROM "public"."orders" GROUP BY DATE_TRUNC('month', "public"."orders"."ordered_at") ORDER BY DATE_TRUNC('month', "public"."orders"."ordered_at") ASC`},
	{tool: "Metabase", step: "time series: by week (Sunday start) of a timestamptz", source: srcMetabasePostgres + " (sql.qp/date :week, adjust-start-of-week)", minRows: 1,
		sql: `SELECT (DATE_TRUNC('week', ("public"."orders"."ordered_at" + INTERVAL '1 day')) + INTERVAL '-1 day') AS "ordered_at", COUNT(*) AS "count" FROM "public"."orders" GROUP BY (DATE_TRUNC('week', ("public"."orders"."ordered_at" + INTERVAL '1 day')) + INTERVAL '-1 day') ORDER BY (DATE_TRUNC('week', ("public"."orders"."ordered_at" + INTERVAL '1 day')) + INTERVAL '-1 day') ASC`},
	{tool: "Metabase", step: "time series: by month of a DATE", source: srcMetabasePostgres + " (date-trunc casts back to date)", minRows: 1,
		sql: `SELECT CAST(DATE_TRUNC('month', "public"."customers"."signup_date") AS date) AS "signup_date", COUNT(*) AS "count" FROM "public"."customers" GROUP BY CAST(DATE_TRUNC('month', "public"."customers"."signup_date") AS date) ORDER BY CAST(DATE_TRUNC('month', "public"."customers"."signup_date") AS date) ASC`},
	// About 14 customers sign up per week, below partition selection's
	// threshold: answered, and the released weeks may be none.
	{tool: "Metabase", step: "time series: by week (Sunday start) of a DATE", source: srcMetabasePostgres + " (add-interval-honeysql-form casts date + interval to date)",
		sql: `SELECT CAST((CAST(DATE_TRUNC('week', CAST(("public"."customers"."signup_date" + INTERVAL '1 day') AS date)) AS date) + INTERVAL '-1 day') AS date) AS "signup_date", COUNT(*) AS "count" FROM "public"."customers" GROUP BY CAST((CAST(DATE_TRUNC('week', CAST(("public"."customers"."signup_date" + INTERVAL '1 day') AS date)) AS date) + INTERVAL '-1 day') AS date) ORDER BY 1 ASC`},
	{tool: "Metabase", step: "time series: month of year (extract-integer)", source: srcMetabasePostgres + " (extract-integer)", minRows: 1,
		sql: `SELECT CAST(extract(month from "public"."orders"."ordered_at") AS integer) AS "ordered_at", COUNT(*) AS "count" FROM "public"."orders" GROUP BY CAST(extract(month from "public"."orders"."ordered_at") AS integer) ORDER BY CAST(extract(month from "public"."orders"."ordered_at") AS integer) ASC`},
	{tool: "Metabase", step: "binning: amount auto-binned (floor((x - min) / w) * w + min)", source: srcMetabaseQP + " (binning)", minRows: 1,
		sql: `SELECT ((FLOOR((("public"."orders"."amount" - 0.0) / 50.0)) * 50.0) + 0.0) AS "amount", COUNT(*) AS "count" FROM "public"."orders" GROUP BY ((FLOOR((("public"."orders"."amount" - 0.0) / 50.0)) * 50.0) + 0.0) ORDER BY ((FLOOR((("public"."orders"."amount" - 0.0) / 50.0)) * 50.0) + 0.0) ASC`},
	{tool: "Metabase", step: "filter: contains, case-insensitive (default)", source: srcMetabaseQP + " (:contains, case-sensitive false)", minRows: 1,
		sql: `SELECT COUNT(*) AS "count" FROM "public"."orders" WHERE LOWER("public"."orders"."channel") LIKE '%we%'`},
	{tool: "Metabase", step: "filter: contains as a bound parameter", source: srcMetabaseQP + " (values are JDBC parameters)", minRows: 1,
		sql: `SELECT COUNT(*) AS "count" FROM "public"."orders" WHERE LOWER("public"."orders"."channel") LIKE $1`, args: []any{"%we%"}},
	{tool: "Metabase", step: "filter: is, and greater than, as bound parameters", source: srcMetabaseQP + " (values are JDBC parameters)", minRows: 1,
		sql: `SELECT COUNT(*) AS "count" FROM "public"."orders" WHERE ("public"."orders"."region" = $1) AND ("public"."orders"."amount" > $2)`, args: []any{"east", 100}},
	{tool: "Metabase", step: "filter: relative dates (previous 12 months)", source: srcMetabasePostgres + " (add-interval-honeysql-form, current-datetime)", minRows: 1,
		sql: `SELECT COUNT(*) AS "count" FROM "public"."orders" WHERE ("public"."orders"."ordered_at" >= DATE_TRUNC('month', (NOW() + INTERVAL '-12 month'))) AND ("public"."orders"."ordered_at" < DATE_TRUNC('month', NOW()))`},

	// ---- Grafana ----
	{tool: "Grafana", step: "query builder: table picker (search path with string_to_array, generate_series)", source: srcGrafanaMeta, minRows: 3,
		sql: `SELECT CASE WHEN quote_ident(table_schema) IN (SELECT CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END FROM generate_series(array_lower(string_to_array(current_setting('search_path'),','),1), array_upper(string_to_array(current_setting('search_path'),','),1)) as i, string_to_array(current_setting('search_path'),',') s) THEN quote_ident(table_name) ELSE quote_ident(table_schema) || '.' || quote_ident(table_name) END AS "table" FROM information_schema.tables WHERE quote_ident(table_schema) NOT IN ('information_schema', 'pg_catalog', '_timescaledb_cache', '_timescaledb_catalog', '_timescaledb_internal', '_timescaledb_config', 'timescaledb_information', 'timescaledb_experimental') ORDER BY 1`},
	{tool: "Grafana", step: "query builder: column picker (parse_ident)", source: srcGrafanaMeta, minRows: 8,
		sql: `SELECT quote_ident(column_name) AS "column", data_type AS "type" FROM information_schema.columns WHERE CASE WHEN array_length(parse_ident('orders'),1) = 2 THEN quote_ident(table_schema) = (parse_ident('orders'))[1] AND quote_ident(table_name) = (parse_ident('orders'))[2] ELSE quote_ident(table_name) = 'orders' AND quote_ident(table_schema) IN (SELECT CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END FROM generate_series(array_lower(string_to_array(current_setting('search_path'),','),1), array_upper(string_to_array(current_setting('search_path'),','),1)) as i, string_to_array(current_setting('search_path'),',') s) END`},
	{tool: "Grafana", step: "time series: $__timeGroupAlias(ordered_at, '7d') and $__timeFilter", source: srcGrafanaMacros, minRows: 1,
		sql: `SELECT floor(extract(epoch from ordered_at)/604800)*604800 AS "time", count(*) AS "orders" FROM orders WHERE ordered_at BETWEEN '2024-01-01T00:00:00Z' AND '2025-01-01T00:00:00Z' GROUP BY 1 ORDER BY 1`},
	{tool: "Grafana", step: "time series: $__time(ordered_at) raw rows", source: srcGrafanaMacros,
		sql:     `SELECT ordered_at AS "time", amount FROM orders WHERE ordered_at BETWEEN '2024-03-01T00:00:00Z' AND '2024-04-01T00:00:00Z' ORDER BY 1`,
		refused: "42501", hint: "$__timeGroupAlias"},
	{tool: "Grafana", step: "time series: a date_trunc bucket with $__timeFilter", source: srcGrafanaMacros + " ($__timeFilter)", minRows: 1,
		sql: `SELECT date_trunc('week', ordered_at) AS "time", sum(amount) AS "revenue" FROM orders WHERE ordered_at BETWEEN '2024-01-01T00:00:00Z' AND '2025-01-01T00:00:00Z' GROUP BY 1 ORDER BY 1`},
	{tool: "Grafana", step: "template variable: SELECT DISTINCT", source: "grafana/grafana: docs/sources/datasources/postgres/template-variables (query variable)", minRows: 1,
		sql: `SELECT DISTINCT channel FROM orders ORDER BY 1`},
	{tool: "Grafana", step: "ad-hoc filter values: UNION ALL of SELECT DISTINCT", source: "issue 14's report of Grafana's filter-value API (file not located)", minRows: 1,
		sql: `SELECT DISTINCT region FROM orders UNION ALL SELECT DISTINCT channel FROM orders`},
	{tool: "Grafana", step: "query builder: aggregation and group by", source: srcGrafanaBuilder, minRows: 4,
		sql: `SELECT COUNT(amount), region FROM orders GROUP BY region LIMIT 50 `},
	{tool: "Grafana", step: "query builder: a column without aggregation (default)", source: srcGrafanaBuilder,
		sql: `SELECT channel FROM orders LIMIT 50 `, refused: "42501", hint: "Aggregation"},

	// ---- Superset ----
	{tool: "Superset", step: "inspector: catalogs", source: srcSupersetPG + " (get_catalog_names)", minRows: 1,
		sql: `SELECT datname FROM pg_database WHERE datistemplate = false`},
	{tool: "Superset", step: "inspector: table names", source: srcSQLAlchemy + " (get_table_names)", minRows: 3,
		sql: `SELECT pg_catalog.pg_class.relname FROM pg_catalog.pg_class JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace WHERE pg_catalog.pg_class.relkind = ANY (ARRAY['r', 'p']) AND pg_catalog.pg_class.relpersistence != 't' AND pg_catalog.pg_table_is_visible(pg_catalog.pg_class.oid) AND pg_catalog.pg_namespace.nspname != 'pg_catalog'`},
	{tool: "Superset", step: "inspector: columns", source: srcSQLAlchemy + " (get_columns)", minRows: 8,
		sql: `SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid) FROM pg_catalog.pg_attrdef d WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.atthasdef) AS DEFAULT, a.attnotnull, a.attrelid as table_oid, pgd.description as comment FROM pg_catalog.pg_attribute a LEFT JOIN pg_catalog.pg_description pgd ON (pgd.objoid = a.attrelid AND pgd.objsubid = a.attnum) WHERE a.attrelid = 'public.orders'::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`},
	{tool: "Superset", step: "chart: weekly time grain with TO_TIMESTAMP range, ordered by metric", source: srcSupersetPG + " (_time_grain_expressions, convert_dttm)", minRows: 1,
		sql: `SELECT DATE_TRUNC('week', ordered_at) AS ordered_at, count(*) AS count FROM public.orders WHERE ordered_at >= TO_TIMESTAMP('2024-01-01 00:00:00.000000', 'YYYY-MM-DD HH24:MI:SS.US') AND ordered_at < TO_TIMESTAMP('2025-01-01 00:00:00.000000', 'YYYY-MM-DD HH24:MI:SS.US') GROUP BY DATE_TRUNC('week', ordered_at) ORDER BY count DESC LIMIT 10000`},
	// About 14 customers sign up per week, below partition selection's
	// threshold: answered, and the released weeks may be none.
	{tool: "Superset", step: "chart: weekly time grain of a DATE with TO_DATE range", source: srcSupersetPG + " (_time_grain_expressions, convert_dttm)",
		sql: `SELECT DATE_TRUNC('week', signup_date) AS signup_date, count(*) AS count FROM public.customers WHERE signup_date >= TO_DATE('2022-01-01', 'YYYY-MM-DD') AND signup_date < TO_DATE('2025-01-01', 'YYYY-MM-DD') GROUP BY DATE_TRUNC('week', signup_date) ORDER BY count DESC LIMIT 10000`},
	{tool: "Superset", step: "SQL Lab: an aggregate with the row limit applied", source: srcSupersetBase + " (apply_limit_to_sql)", minRows: 4,
		sql: `SELECT region, avg(amount) AS avg_amount FROM orders GROUP BY region
LIMIT 1001`},
	// region has public values: no partition selection and no
	// aggregate: every public value is the answer, read from no row and
	// charged nothing.
	{tool: "Superset", step: "native filter values (group by the column, no metric)", source: srcSupersetModels + " (get_sqla_query)", minRows: 4,
		sql: `SELECT region AS region FROM public.orders GROUP BY region ORDER BY region ASC LIMIT 1000`},
	{tool: "Superset", step: "samples of a dataset", source: srcSupersetModels + " (samples: SELECT * with SAMPLES_ROW_LIMIT)",
		sql: `SELECT * FROM public.orders LIMIT 1000`, refused: "42501", hint: "data viewer"},
	// SQL Lab asks for it before every query it runs (superset/sql_lab.py,
	// execute_sql_statements) and fails when it is refused. PostgreSQL's
	// answer is the pid of BackendKeyData: the proxy should answer with
	// the pid it gave the session, never the shared upstream's.
	{tool: "Superset", step: "SQL Lab: cancel id of the connection", source: srcSupersetPG + " (get_cancel_query_id); apache/superset: superset/sql_lab.py", minRows: 1,
		sql: `SELECT pg_backend_pid()`},

	// ---- Tableau (psqlODBC) ----
	{tool: "Tableau", step: "SQLTables", source: srcPsqlODBC, minRows: 3,
		sql: `select relname, nspname, relkind from pg_catalog.pg_class c, pg_catalog.pg_namespace n where relkind in ('r', 'v', 'm', 'f', 'p') and nspname like 'public' and nspname not in ('pg_catalog', 'information_schema', 'pg_toast', 'pg_temp_1') and n.oid = relnamespace order by nspname, relname`},
	{tool: "Tableau", step: "SQLColumns", source: srcPsqlODBC, minRows: 8,
		sql: `select n.nspname, c.relname, a.attname, a.atttypid, t.typname, a.attnum, a.attlen, a.atttypmod, a.attnotnull, c.relhasrules, c.relkind, c.oid, pg_get_expr(d.adbin, d.adrelid), case t.typtype when 'd' then t.typbasetype else 0 end, t.typtypmod, 0, attidentity, c.relhassubclass from (((pg_catalog.pg_class c inner join pg_catalog.pg_namespace n on n.oid = c.relnamespace and c.relname like 'orders' and n.nspname like 'public') inner join pg_catalog.pg_attribute a on (not a.attisdropped) and a.attnum > 0 and a.attrelid = c.oid) inner join pg_catalog.pg_type t on t.oid = a.atttypid) left outer join pg_attrdef d on a.atthasdef and d.adrelid = a.attrelid and d.adnum = a.attnum order by n.nspname, c.relname, attnum`},
	{tool: "Tableau", step: "column probe (WHERE 1=0) before SQLColumns", source: "issue 14's report (Tableau probes with SELECT * forms, then SQLColumns)",
		sql: `SELECT * FROM "public"."orders" "orders" WHERE (1 = 0)`, refused: "42501", hint: "Live"},
	{tool: "Tableau", step: "sheet: SUM(amount) by region (Live)", source: srcTableauDialect, minRows: 4,
		sql: `SELECT "orders"."region" AS "region", SUM("orders"."amount") AS "sum:amount:ok" FROM "public"."orders" "orders" GROUP BY 1`},
	{tool: "Tableau", step: "sheet: COUNTD(customer_id)", source: srcTableauDialect, minRows: 1,
		sql: `SELECT COUNT(DISTINCT "orders"."customer_id") AS "ctd:customer_id:ok" FROM "public"."orders" "orders" HAVING (COUNT(1) > 0)`},
	{tool: "Tableau", step: "sheet: YEAR(ordered_at)", source: srcTableauDialect + " (YEAR: CAST(EXTRACT(YEAR FROM %1) AS INTEGER))", minRows: 1,
		sql: `SELECT CAST(EXTRACT(YEAR FROM "orders"."ordered_at") AS INTEGER) AS "yr:ordered_at:ok", SUM("orders"."amount") AS "sum:amount:ok" FROM "public"."orders" "orders" GROUP BY 1`},
	{tool: "Tableau", step: "Extract (every row)", source: "Tableau extracts read every column of every row",
		sql: `SELECT "orders"."amount" AS "amount", "orders"."region" AS "region" FROM "public"."orders" "orders"`, refused: "42501"},
	{tool: "Tableau", step: "temporary table for a filter", source: "Tableau creates #Tableau_ temp tables for large filters; it falls back to IN lists",
		sql: `CREATE LOCAL TEMPORARY TABLE "#Tableau_1_Filter" ("region" TEXT) ON COMMIT PRESERVE ROWS`, refused: "42501"},

	// ---- Power BI and Excel (psqlODBC) ----
	{tool: "Power BI/Excel", step: "DirectQuery: count rows by region", source: srcPsqlODBC + "; Power Query folds Table.Group to GROUP BY", minRows: 4,
		sql: `select "region", count(1) as "C1" from "public"."orders" as "_" group by "region"`},
	{tool: "Power BI/Excel", step: "Excel MS Query: three-part name of a private table", source: srcPsqlODBC + " (the database is the ODBC catalog)", minRows: 4,
		sql: `SELECT orders.region, Count(*) FROM "{db}".public.orders orders GROUP BY orders.region`},
	{tool: "Power BI/Excel", step: "Excel MS Query: three-part name of a public table", source: srcPsqlODBC + " (the database is the ODBC catalog)", minRows: 50,
		sql: `SELECT products.name, products.price FROM "{db}".public.products products`},
	{tool: "Power BI/Excel", step: "three-part name of another database", source: srcPsqlODBC,
		sql: `SELECT count(*) FROM "not_this_database".public.orders`, refused: "42501 0A000 3D000"},
	{tool: "Power BI/Excel", step: "Import mode (every row)", source: "Power Query's import of a table reads every column of every row",
		sql: `select "$Table"."order_id", "$Table"."amount", "$Table"."region" from "public"."orders" "$Table"`, refused: "42501"},

	// ---- DBeaver and pgAdmin ----
	{tool: "DBeaver", step: "data tab of a private table", source: srcDBeaver,
		sql: `SELECT * FROM public.orders LIMIT 200`, refused: "42501", hint: "data viewer"},
	{tool: "DBeaver", step: "Calculate total row count", source: srcDBeaver, minRows: 1,
		sql: `SELECT COUNT(*) FROM public.orders`},
	{tool: "pgAdmin", step: "View Data: First 100 Rows", source: srcPgAdmin,
		sql: "SELECT * FROM public.orders\nORDER BY order_id ASC LIMIT 100", refused: "42501", hint: "data viewer"},
	{tool: "pgAdmin", step: "dashboard: sessions", source: srcPgAdmin + " activity.sql",
		sql: `SELECT pid, datname, usename, application_name, client_addr, backend_start, state FROM pg_catalog.pg_stat_activity ORDER BY pid`, refused: "42501"},
}

// TestToolsReplay replays toolCases: answered ones return at least
// minRows rows, refused ones the SQLSTATE and the tool's hint, with no
// row, nothing charged and a connection that still answers. Each runs in
// the simple protocol (psycopg2: Superset, pgAdmin) and in the extended
// one with a Describe before Bind (pgJDBC: Metabase, DBeaver; pgx/lib/pq:
// Grafana; psqlODBC's server-side prepare: Tableau, Power BI, Excel); a
// case with bound parameters only in the extended one.
func TestToolsReplay(t *testing.T) {
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeDescribeExec} {
		t.Run(mode.String(), func(t *testing.T) { replayTools(t, mode) })
	}
}

func replayTools(t *testing.T, mode pgx.QueryExecMode) {
	conn := connect(t, "alice", pwAlice)
	var db string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	for _, c := range toolCases {
		name := c.tool + "/" + c.step
		if c.args != nil && mode == pgx.QueryExecModeSimpleProtocol {
			continue // pgx would put the values into the text
		}
		t.Run(name, func(t *testing.T) {
			sql := strings.ReplaceAll(c.sql, "{db}", db)
			var before budgetRow
			if c.refused != "" {
				before = showBudget(t, conn)
			}
			args := append([]any{mode}, c.args...)
			n, err := replayRows(conn, sql, args...)
			source := " (" + c.source + ")"
			switch {
			case c.refused == "" && err != nil:
				t.Errorf("want answered, got %v%s", err, source)
			case c.refused == "" && n < c.minRows:
				t.Errorf("answered with %d rows, want at least %d%s", n, c.minRows, source)
			case c.refused != "":
				var pe *pgconn.PgError
				if !errors.As(err, &pe) {
					t.Fatalf("want refused with %s, got %v (%d rows)%s", c.refused, err, n, source)
				}
				if !strings.Contains(c.refused, pe.Code) {
					t.Errorf("refused with %s (%s), want %s%s", pe.Code, pe.Message, c.refused, source)
				}
				if n > 0 {
					t.Errorf("%d rows before the refusal", n)
				}
				if c.hint != "" && !strings.Contains(pe.Hint, c.hint) {
					t.Errorf("hint %q does not name the tool's setting (want %q)", pe.Hint, c.hint)
				}
				if after := showBudget(t, conn); after != before {
					t.Errorf("the refusal charged the budget: %+v -> %+v", before, after)
				}
				t.Logf("%s: %s %s (hint: %s)", name, pe.Code, pe.Message, pe.Hint)
			}
			var one int
			if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
				t.Fatalf("connection unusable after %s: %v", name, err)
			}
		})
	}
}

// replayRows runs sql with args and reads its rows.
func replayRows(conn *pgx.Conn, sql string, args ...any) (int, error) {
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return 0, err
	}
	n := 0
	for rows.Next() {
		n++
	}
	rows.Close()
	return n, rows.Err()
}

// TestPassThroughCatalogFunctions runs the string and array functions
// allowed for tools' catalog queries through the proxy: the proxy's
// deparse ("left"(…), E'\\1') means to PostgreSQL what the client wrote,
// and the answers are PostgreSQL's own (compared with the database read
// directly).
func TestPassThroughCatalogFunctions(t *testing.T) {
	conn := connect(t, "alice", pwAlice)
	up := direct(t)
	for _, sql := range []string{
		`SELECT format('%I.%I', table_schema, table_name), quote_ident(table_name), quote_literal(table_name), quote_nullable(table_name), concat_ws('.', table_schema, table_name), left(table_name, 3), right(table_name, 3), regexp_replace(table_name, '^(.)', '\1_', 'g') FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1`,
		`SELECT c.conname, array_length(c.conkey, 1), array_dims(c.conkey), array_ndims(c.conkey), cardinality(c.conkey), array_position(c.conkey, 2::int2), array_positions(c.conkey, 2::int2), array_to_string(array_append(c.conkey, 0::int2), ','), array_prepend(0::int2, c.conkey), array_cat(c.conkey, c.confkey), array_remove(c.conkey, 2::int2), array_replace(c.conkey, 2::int2, 3::int2), (parse_ident('public.orders'))[2] FROM pg_catalog.pg_constraint c WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace ORDER BY 1`,
		`SELECT col_description(CAST(CAST(format('%I.%I', 'public', 'orders') AS regclass) AS oid), 2), obj_description('public.orders'::regclass::oid, 'pg_class')`,
		`SELECT i FROM generate_series(10, 1, -3) AS i`,
		`SELECT floor(price / 25) * 25 AS bin, count(*), round(avg(price), 2) FROM products GROUP BY 1 ORDER BY 1`,
	} {
		want := textRows(t, up, sql)
		got := textRows(t, conn, sql)
		if strings.Join(got, "\n") != strings.Join(want, "\n") || len(want) == 0 {
			t.Errorf("%.60s...: through the proxy\n%v\ndirectly\n%v", sql, got, want)
		}
	}
}

// TestPassThroughSeriesBounded: a generate_series of literal bounds over
// the limit is refused at once (54000), nothing runs, and the session
// goes on; one within the limit is answered.
func TestPassThroughSeriesBounded(t *testing.T) {
	conn := connect(t, "alice", pwAlice)
	_, err := replayRows(conn, "SELECT count(*) FROM generate_series(1, 1e11)")
	checkCode(t, "generate_series(1, 1e11)", err, "54000")
	var n int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM generate_series(1, 1000000)").Scan(&n); err != nil || n != 1000000 {
		t.Errorf("generate_series(1, 1000000): %d, %v", n, err)
	}
}

// textRows reads every row of sql as text.
func textRows(t *testing.T, conn *pgx.Conn, sql string) []string {
	t.Helper()
	rows, err := conn.Query(ctx, sql, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatalf("%.60s...: %v", sql, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		vals := rows.RawValues()
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = string(v)
		}
		out = append(out, strings.Join(parts, "|"))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%.60s...: %v", sql, err)
	}
	return out
}
