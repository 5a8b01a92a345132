-- intent: what Metabase, DBeaver and Superset send on connect and while browsing (session SETs, SHOW, schema lists) is accepted as a whole
-- Metabase, DBeaver and Superset (SQLAlchemy) on connect and while browsing the schema.
SET extra_float_digits = 2;
SET application_name = 'Metabase v0.55.1';
SHOW TRANSACTION ISOLATION LEVEL;
SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ UNCOMMITTED;
SELECT nspname AS "TABLE_SCHEM", current_database() AS "TABLE_CATALOG" FROM pg_catalog.pg_namespace WHERE nspname <> 'pg_toast' AND (nspname !~ '^pg_temp_' OR nspname = (pg_catalog.current_schemas(true))[1]) AND (nspname !~ '^pg_toast_temp_' OR nspname = replace((pg_catalog.current_schemas(true))[1], 'pg_temp_', 'pg_toast_temp_')) ORDER BY "TABLE_SCHEM";
with table_privileges as (
  select NULL as role, t.schemaname as schema, t.objectname as table,
    pg_catalog.has_any_column_privilege(current_user, '"' || replace(t.schemaname, '"', '""') || '"' || '.' || '"' || replace(t.objectname, '"', '""') || '"', 'update') as update,
    pg_catalog.has_any_column_privilege(current_user, '"' || replace(t.schemaname, '"', '""') || '"' || '.' || '"' || replace(t.objectname, '"', '""') || '"', 'select') as select,
    pg_catalog.has_any_column_privilege(current_user, '"' || replace(t.schemaname, '"', '""') || '"' || '.' || '"' || replace(t.objectname, '"', '""') || '"', 'insert') as insert,
    pg_catalog.has_table_privilege(current_user, '"' || replace(t.schemaname, '"', '""') || '"' || '.' || '"' || replace(t.objectname, '"', '""') || '"', 'delete') as delete
  from (
    select schemaname, tablename as objectname from pg_catalog.pg_tables
    union
    select schemaname, viewname as objectname from pg_catalog.pg_views
    union
    select schemaname, matviewname as objectname from pg_catalog.pg_matviews
  ) t
  where t.schemaname !~ '^pg_' and t.schemaname <> 'information_schema'
    and pg_catalog.has_schema_privilege(current_user, t.schemaname, 'usage')
)
select t.* from table_privileges t;
SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED;
show timezone;
SELECT current_schema(),session_user;
SHOW search_path;
SELECT n.oid,n.*,d.description FROM pg_catalog.pg_namespace n LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=n.oid AND d.objsubid=0 AND d.classoid='pg_namespace'::regclass ORDER BY nspname;
SELECT db.oid,db.* FROM pg_catalog.pg_database db WHERE datname = current_database();
select * from pg_catalog.pg_settings where name='standard_conforming_strings';
SELECT reset_val FROM pg_catalog.pg_settings WHERE name = 'search_path';
select string_agg(word, ',') from pg_catalog.pg_get_keywords() where word <> ALL ('{a,abs,absolute,action}'::text[]);
SELECT t.oid,t.*,c.relkind,format_type(nullif(t.typbasetype, 0), t.typtypmod) as base_type_name, d.description FROM pg_catalog.pg_type t LEFT OUTER JOIN pg_catalog.pg_type et ON et.oid=t.typelem LEFT OUTER JOIN pg_catalog.pg_class c ON c.oid=t.typrelid LEFT OUTER JOIN pg_catalog.pg_description d ON t.oid=d.objoid WHERE t.typname IS NOT NULL AND (c.relkind IS NULL OR c.relkind = 'c') AND (et.typcategory IS NULL OR et.typcategory <> 'C');
SELECT reltype FROM pg_catalog.pg_class WHERE 1<>1 LIMIT 1;
select pg_catalog.version();
select current_schema();
show standard_conforming_strings;
show transaction isolation level;
SELECT CAST('test plain returns' AS VARCHAR(60)) AS anon_1;
SELECT CAST('test unicode returns' AS VARCHAR(60)) AS anon_1;
SELECT t.oid, typarray FROM pg_type t JOIN pg_namespace ns ON typnamespace = ns.oid WHERE typname = 'hstore';
SELECT c.oid FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE (pg_catalog.pg_table_is_visible(c.oid)) AND c.relname = 'orders' AND c.relkind in ('r', 'v', 'm', 'f', 'p');
SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid) FROM pg_catalog.pg_attrdef d WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.atthasdef) AS DEFAULT, a.attnotnull, a.attrelid as table_oid, pgd.description as comment, a.attgenerated as generated, (SELECT json_build_object('always', a.attidentity = 'a', 'start', s.seqstart, 'increment', s.seqincrement, 'minvalue', s.seqmin, 'maxvalue', s.seqmax, 'cache', s.seqcache, 'cycle', s.seqcycle) FROM pg_catalog.pg_sequence s, pg_catalog.pg_class c WHERE s.seqrelid = c.oid AND c.relkind = 'S' AND a.attidentity != '' AND s.seqrelid = CAST(pg_catalog.pg_get_serial_sequence(CAST(CAST(a.attrelid AS REGCLASS) AS TEXT), a.attname) AS REGCLASS)) as identity_options FROM pg_catalog.pg_attribute a LEFT JOIN pg_catalog.pg_description pgd ON (pgd.objoid = a.attrelid AND pgd.objsubid = a.attnum) WHERE a.attrelid = 'public.orders'::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum;
SELECT pg_catalog.pg_class.relname FROM pg_catalog.pg_class JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace WHERE pg_catalog.pg_class.relkind = ANY (ARRAY['r', 'p']) AND pg_catalog.pg_class.relpersistence != 't' AND pg_catalog.pg_table_is_visible(pg_catalog.pg_class.oid) AND pg_catalog.pg_namespace.nspname != 'pg_catalog';
SELECT current_setting('server_version_num');
