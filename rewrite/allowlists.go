package rewrite

import (
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
)

// This file holds every list of the rewrite package that decides whether
// a statement is accepted or refused, each with its reason, so that a
// security review of what dpproxy lets through needs no other file. The
// one exception is the totality table (totality.go: which types,
// comparisons, casts and date/time fields a private query may compute on
// row values), whose entries each come with the PostgreSQL behaviour
// that makes them safe and its own test against PostgreSQL
// (TestTotalityTableAgainstPostgres). Nearly everything is an allowlist:
// what is not listed is refused, with 42501, so whatever a later
// PostgreSQL adds stays refused until someone reviews it. The lists named
// "refused..." or "known..." only choose the message and the code of a
// refusal.
//
// Index, in the order of this file:
//
//	Private queries (a query that reads a private table)
//	  systemColumns           columns refused anywhere in the query
//	  dpAggregates            the aggregates released with noise
//	  knownAggregates         other aggregates: refused with 0A000, not 42501
//	  comparisonOps, likeOps, arithmeticOps, regexOps
//	                          operators on row values
//	  postFuncs               functions over released (noisy) values
//	  constFuncs, constOps, constSQLValueFunctions
//	                          what a constant the proxy evaluates may use
//	  totality.go             scalarTypes, castTypeNames, comparable,
//	                          castTotal, unify, extractFields, truncUnits,
//	                          truncBounds: computations on row values
//	Session settings
//	  settableSettings        what SET, RESET and startup parameters may change
//	  PinnedSettings          what every upstream connection starts with
//	  refusedSettingReasons   why some well-known settings are refused
//	  readableSettings        what current_setting, pg_settings and SHOW read
//	Pass-through queries (catalogs, public tables, no table)
//	  catalogAllowlist        catalog relations read as they are
//	  refusedRelations        reviewed refusals, with their reasons
//	  statsViewPrefix         statistics views: masked or refused
//	  maskedRelations         catalog relations read through a mask (mask.go)
//	  statsValueColumns       columns of pg_statistic_ext refused
//	  passThroughFuncs        functions a pass-through query may call
//	  refusedFuncReasons      why some well-known functions are refused
//	  infoSchemaFuncs         information_schema helpers allowed
//
// Statement kinds are decided by code, not a list: classifyStmt
// (analyze.go) accepts SELECT (pass-through or private), EXPLAIN, SET,
// SHOW, RESET, DISCARD, transaction control and DEALLOCATE, and refuses
// every other statement; the sizes a query may have are limits, not
// lists (guard.go, work.go, arith.go).

// ---- Private queries ----

// systemColumns identify individual rows (or reveal physical layout).
// A query over a private table that names one anywhere is refused with
// 42501 (noSystemColumns, scope.go): ctid or xmin in a group key or a
// condition would single out rows.
var systemColumns = map[string]bool{
	"ctid": true, "xmin": true, "xmax": true, "cmin": true, "cmax": true, "tableoid": true, "oid": true,
}

// dpAggregates are the aggregates the rewrite bounds. Each has its case
// in aggregate (aggregates.go), its parts in the result layout
// (layout.go), the template that bounds each unit's contribution to them
// (template.go) and a mechanism in the proxy that noises them; any other
// function over a private table's rows in the select list is refused.
var dpAggregates = map[string]bool{
	"count": true, "sum": true, "avg": true,
	"variance": true, "var_samp": true, "var_pop": true, "stddev": true, "stddev_samp": true, "stddev_pop": true,
	"percentile_cont": true, "percentile_disc": true,
}

// knownAggregates are aggregates of PostgreSQL that are not supported on
// private tables: they get a 0A000 rather than a 42501.
var knownAggregates = map[string]bool{
	"min": true, "max": true, "mode": true,
	"array_agg": true, "string_agg": true, "bool_and": true, "bool_or": true, "every": true,
	"bit_and": true, "bit_or": true, "json_agg": true, "jsonb_agg": true, "corr": true, "covar_pop": true,
	"covar_samp": true, "regr_count": true, "median": true, "json_object_agg": true, "xmlagg": true,
}

// Operators of conditions on a private table. comparisonOps and likeOps
// compare row values in conditions, with the types the totality table
// allows (predicates.go; a LIKE pattern must be a valid constant).
// arithmeticOps are sent to the arithmetic check (arith.go), which allows
// +, -, * and / by a non-zero constant on bounded columns, never in a
// condition. regexOps are listed only to be refused by name: a regular
// expression's errors and cost depend on the rows. Any other operator is
// refused.
var (
	comparisonOps = map[string]bool{"=": true, "<>": true, "!=": true, "<": true, ">": true, "<=": true, ">=": true}
	likeOps       = map[string]bool{"~~": true, "!~~": true, "~~*": true, "!~~*": true}
	arithmeticOps = map[string]bool{"+": true, "-": true, "*": true, "/": true, "%": true, "^": true}
	regexOps      = map[string]bool{"~": true, "~*": true, "!~": true, "!~*": true}
)

// postFuncs may be applied to noisy outputs (post-processing): they see
// only released values.
var postFuncs = map[string]bool{
	"round": true, "trunc": true, "abs": true, "ceil": true, "ceiling": true, "floor": true, "sign": true,
	"sqrt": true, "cbrt": true, "power": true, "pow": true, "exp": true, "ln": true, "log": true, "log10": true,
	"to_char": true, "lower": true, "upper": true, "concat": true, "length": true, "date_trunc": true,
	"date_part": true, "extract": true, "div": true, "mod": true,
}

// constFuncs may be evaluated when a constant is hoisted: they have no
// side effect, read no table, sequence, file or setting (but the session's
// time zone and date style, as any date input does), and use memory
// bounded by their arguments' size (so repeat, lpad and rpad are not here)
// and time bounded by it (so no regular expression: substring(x FROM
// pattern) is not here, substr is).
var constFuncs = map[string]bool{
	// date and time
	"now": true, "transaction_timestamp": true, "statement_timestamp": true, "clock_timestamp": true,
	"to_date": true, "to_timestamp": true, "to_char": true, "to_number": true,
	"make_date": true, "make_time": true, "make_timestamp": true, "make_timestamptz": true, "make_interval": true,
	"date_trunc": true, "date_part": true, "extract": true, "date_bin": true, "age": true, "isfinite": true,
	"justify_days": true, "justify_hours": true, "justify_interval": true, "timezone": true,
	// strings
	"lower": true, "upper": true, "initcap": true, "length": true, "char_length": true, "character_length": true,
	"substr": true, "left": true, "right": true, "btrim": true, "ltrim": true, "rtrim": true,
	"concat": true, "concat_ws": true, "replace": true, "split_part": true, "strpos": true, "position": true,
	// numbers
	"abs": true, "round": true, "trunc": true, "floor": true, "ceil": true, "ceiling": true, "sign": true,
	"mod": true, "div": true, "sqrt": true, "cbrt": true, "power": true, "pow": true, "exp": true, "ln": true,
	"log": true, "log10": true,
}

// constOps are the operators a hoisted constant may use. The proxy
// evaluates such a constant before any private row is read (hoist.go), so
// whether it fails depends on the query alone; these operators have no
// side effect and cost no more than their operands' size.
var constOps = map[string]bool{
	"+": true, "-": true, "*": true, "/": true, "%": true, "^": true, "||": true,
	"=": true, "<>": true, "!=": true, "<": true, ">": true, "<=": true, ">=": true,
	"~~": true, "!~~": true, "~~*": true, "!~~*": true,
}

// constSQLValueFunctions are the SQL-standard date/time functions written
// without parentheses (CURRENT_DATE, ...). CURRENT_USER and its kin would
// name the upstream role: refused.
var constSQLValueFunctions = map[pg_query.SQLValueFunctionOp]bool{
	pg_query.SQLValueFunctionOp_SVFOP_CURRENT_DATE: true, pg_query.SQLValueFunctionOp_SVFOP_CURRENT_TIME: true,
	pg_query.SQLValueFunctionOp_SVFOP_CURRENT_TIME_N: true, pg_query.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP: true,
	pg_query.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP_N: true, pg_query.SQLValueFunctionOp_SVFOP_LOCALTIME: true,
	pg_query.SQLValueFunctionOp_SVFOP_LOCALTIME_N: true, pg_query.SQLValueFunctionOp_SVFOP_LOCALTIMESTAMP: true,
	pg_query.SQLValueFunctionOp_SVFOP_LOCALTIMESTAMP_N: true,
}

// ---- Session settings ----

// settableSettings are the settings a client may change, by SET, RESET
// or as startup parameters: they change how values are rendered or
// compared, or how long statements may wait, never how SQL text is parsed,
// which rows are read, what the proxy's upstream role may do, nor how the
// database samples. Everything else is pinned: the upstream connections
// start with the values of PinnedSettings, which RESET and DISCARD ALL
// restore. Settings that change rendering are part of the answer cache's
// key (proxy/answer.go), since a cached answer's group keys were rendered
// under them.
var settableSettings = map[string]bool{
	"application_name":                    true,
	"datestyle":                           true,
	"intervalstyle":                       true,
	"timezone":                            true,
	"extra_float_digits":                  true,
	"lc_monetary":                         true,
	"lc_numeric":                          true,
	"lc_time":                             true,
	"bytea_output":                        true,
	"statement_timeout":                   true,
	"lock_timeout":                        true,
	"idle_in_transaction_session_timeout": true,
	"client_min_messages":                 true,
}

// PinnedSettings are set on every upstream query connection at connect
// time (as startup parameters, so that RESET ALL and DISCARD ALL restore
// them) and no client can change them: each one changes how PostgreSQL
// reads the SQL text the proxy sends (client_encoding,
// standard_conforming_strings, backslash_quote, transform_null_equals) or
// what the session may do (read-only transactions). pg_query reads text
// as UTF-8 with standard_conforming_strings on and backslash_quote
// safe_encoding: the upstream must read it the same way.
var PinnedSettings = map[string]string{
	"client_encoding":               "UTF8",
	"standard_conforming_strings":   "on",
	"backslash_quote":               "safe_encoding",
	"transform_null_equals":         "off",
	"default_transaction_read_only": "on",
	"search_path":                   "public",
}

// refusedSettingReasons explain the refusal of some well-known settings.
var refusedSettingReasons = map[string]string{
	"seed":                          "it could steer sampling inside the database",
	"search_path":                   "it could redirect table names",
	"role":                          "it would change the upstream role",
	"session_authorization":         "it would change the upstream role",
	"default_transaction_read_only": "the upstream session must stay read-only",
	"transaction_read_only":         "the upstream session must stay read-only",
	"standard_conforming_strings":   "it changes how the SQL dpproxy sends is read",
	"backslash_quote":               "it changes how the SQL dpproxy sends is read",
	"transform_null_equals":         "it changes the meaning of the SQL dpproxy checked",
	"row_security":                  "it changes which rows the upstream role reads",
	"session_replication_role":      "it changes what the upstream session may do",
}

// readableSettings are the settings a client may read, by current_setting
// with a constant name, as rows of pg_settings or by SHOW (session.go)
// (lower case): what clients ask for on connect, the server's version and
// formatting. Others may hold anything an operator put in them (custom
// settings, file paths), so current_setting of any other or a computed
// name is refused and pg_settings shows no other row.
var readableSettings = func() map[string]bool {
	m := map[string]bool{
		"server_version": true, "server_version_num": true, "server_encoding": true, "client_encoding": true,
		"datestyle": true, "intervalstyle": true, "timezone": true, "standard_conforming_strings": true,
		"integer_datetimes": true, "transaction_isolation": true, "default_transaction_isolation": true,
		"transaction_read_only": true, "default_transaction_read_only": true, "search_path": true,
		"max_identifier_length": true, "max_index_keys": true, "application_name": true,
		"extra_float_digits": true, "lc_collate": true, "lc_ctype": true, "bytea_output": true,
	}
	// What a client may set, it may read (session.go).
	for name := range settableSettings {
		m[name] = true
	}
	return m
}()

// ---- Pass-through queries ----
//
// These lists decide what a pass-through query (one that reads no private
// table) may read of PostgreSQL's catalogs and which functions it may
// call, so that a review of catalog access needs no other section.
// Everything is an allowlist: a relation, column, setting or function
// that is not listed here is refused with 42501, so whatever a later
// PostgreSQL adds stays refused until someone reviews it.
//
// The rule behind the lists: the schema is not protected (docs/threat-
// model.md), so a catalog that describes objects (their names, columns,
// types, keys, definitions, owners and privileges) may be read; one that
// holds data values, counts or sizes of rows, other sessions' state,
// settings, server files or credentials may not, or only masked
// (mask.go). Each allowed group names the clients that read it; their
// queries are the golden files testdata/clients/ok_client_*.sql, and
// e2e/clients_test.go runs the clients. TestCatalogDecisionsCoverUpstream
// checks that every relation of a real PostgreSQL has a decision here.

// catalogAllowlist are the relations of pg_catalog and information_schema
// a pass-through query may read as they are ("schema.name"). The masked
// relations (maskedRelations) are read too, through their masks.
var catalogAllowlist = relations(
	// Every client: psql's \d, \dt, \dv, \di, \dm, \ds, \df; pgJDBC's
	// DatabaseMetaData (getTables, getColumns, getPrimaryKeys,
	// getImportedKeys, getIndexInfo, getProcedures, getTypeInfo); psqlODBC's
	// SQLTables, SQLColumns, SQLPrimaryKeys, SQLForeignKeys, SQLStatistics,
	// SQLProcedures (Tableau, Excel, Power BI); SQLAlchemy's inspector
	// (Superset); asyncpg's type introspection (pg_type, pg_namespace);
	// Metabase's sync; DBeaver's navigator. pg_class is masked.
	"pg_catalog", "pg_namespace pg_attribute pg_type pg_attrdef pg_constraint pg_index pg_am pg_description pg_proc",

	// psql's \d NAME of a table, view or sequence: collations, partitions
	// and inheritance, triggers, rules, publications, extended statistics
	// (their definitions; their values are in pg_statistic_ext_data, and
	// statsValueColumns refuses the columns that held them before
	// PostgreSQL 12), the sequence's owner (pg_depend), and row-level
	// security policies. A policy's expression is DDL written by the
	// table's owner, like a view's definition, and psql's \d prints it
	// for every table, so pg_policy is allowed.
	"pg_catalog", "pg_collation pg_inherits pg_partitioned_table pg_trigger pg_rewrite pg_statistic_ext pg_depend "+
		"pg_policy pg_publication pg_publication_namespace pg_publication_rel",

	// psql's \l (databases), \du (roles: pg_roles is masked), \dx
	// (extensions), \dT (enum labels); shobj_description's comments on
	// databases and roles (\l+, \du+, DBeaver); asyncpg's introspection of
	// range types; SQLAlchemy's get_columns (identity options, from
	// pg_sequence: definitions, never values) and get_enums; Grafana's
	// TimescaleDB check (pg_extension); psqlODBC's SQLTablePrivileges
	// (pg_group, like pg_roles without settings); \db and the tablespace
	// line of \d.
	"pg_catalog", "pg_database pg_auth_members pg_extension pg_enum pg_range pg_sequence pg_shdescription "+
		"pg_group pg_tablespace",

	// Views over the catalogs above: Metabase reads pg_tables, pg_views
	// and pg_matviews for its privilege check; DBeaver reads pg_policies.
	// None shows a count or a size.
	"pg_catalog", "pg_tables pg_views pg_matviews pg_indexes pg_rules pg_policies pg_publication_tables",

	// psql's other backslash commands and DBeaver's navigator: \da
	// (aggregates), \dA* (access methods, operator classes and families),
	// \dC (casts), \dc (conversions), \ddp (default privileges), \dy (event
	// triggers), \dew and \det (foreign-data wrappers and foreign tables;
	// not foreign servers, whose options hold connection details), \dL
	// (languages), \do (operators), \dF* (text search). pg_init_privs and
	// pg_transform are DDL no checked client reads, as harmless as the
	// rest: the initial privileges of extensions' objects and the
	// transforms between types and languages.
	"pg_catalog", "pg_aggregate pg_amop pg_amproc pg_opclass pg_opfamily pg_operator pg_cast pg_conversion "+
		"pg_default_acl pg_event_trigger pg_foreign_data_wrapper pg_foreign_table pg_language "+
		"pg_ts_config pg_ts_config_map pg_ts_dict pg_ts_parser pg_ts_template pg_init_privs pg_transform",

	// The server's copy of the public time zone database (time zone
	// pickers).
	"pg_catalog", "pg_timezone_abbrevs pg_timezone_names",

	// information_schema: the SQL standard's views of the same schema,
	// each filtered by the upstream role's privileges. Grafana's schema,
	// table and column pickers read schemata, tables and columns;
	// Metabase's describe-fields reads columns, table_constraints and
	// key_column_usage; DBeaver reads sequences (definitions, never
	// values), table_privileges and routine_privileges; the sql_* tables
	// are the standard's static feature lists. foreign_servers lists
	// servers without their options.
	"information_schema", "administrable_role_authorizations applicable_roles attributes character_sets "+
		"check_constraint_routine_usage check_constraints collation_character_set_applicability collations "+
		"column_column_usage column_domain_usage column_options column_privileges column_udt_usage columns "+
		"constraint_column_usage constraint_table_usage data_type_privileges domain_constraints "+
		"domain_udt_usage domains element_types enabled_roles foreign_data_wrapper_options "+
		"foreign_data_wrappers foreign_servers foreign_table_options foreign_tables "+
		"information_schema_catalog_name key_column_usage parameters referential_constraints "+
		"role_column_grants role_routine_grants role_table_grants role_udt_grants role_usage_grants "+
		"routine_column_usage routine_privileges routine_routine_usage routine_sequence_usage "+
		"routine_table_usage routines schemata sequences sql_features sql_implementation_info sql_parts "+
		"sql_sizing table_constraints table_privileges tables transforms triggered_update_columns triggers "+
		"udt_privileges usage_privileges user_defined_types view_column_usage view_routine_usage "+
		"view_table_usage views",
)

// refusedRelations are the reviewed refusals, each with the reason a
// client is told ("reading pg_catalog.pg_locks is refused: ..."). Every
// relation of PostgreSQL 15's pg_catalog and information_schema is either
// on catalogAllowlist, masked, a statistics view (statsViewPrefix) or
// here. Anything else (a relation of a later PostgreSQL, a misspelling) is
// refused as not on the allowlist.
var refusedRelations = map[string]string{
	// Data values and counts of tables.
	"pg_catalog.pg_statistic":            "it holds data values from tables",
	"pg_catalog.pg_statistic_ext_data":   "it holds data values from tables",
	"pg_catalog.pg_stats":                "it holds data values from tables",
	"pg_catalog.pg_stats_ext":            "it holds data values from tables",
	"pg_catalog.pg_stats_ext_exprs":      "it holds data values from tables",
	"pg_catalog.pg_sequences":            "sequence values count the rows inserted into tables",
	"pg_catalog.pg_largeobject":          "it holds the contents of large objects",
	"pg_catalog.pg_largeobject_metadata": "it lists large objects",

	// The upstream's credentials: password hashes; user-mapping,
	// subscription and foreign-server options may hold passwords or
	// connection details.
	"pg_catalog.pg_authid":                      "it holds the password hashes of database roles",
	"pg_catalog.pg_shadow":                      "it holds the password hashes of database roles",
	"pg_catalog.pg_user_mapping":                "its options may hold passwords of foreign servers",
	"pg_catalog.pg_user_mappings":               "its options may hold passwords of foreign servers",
	"pg_catalog.pg_subscription":                "its connection strings may hold passwords",
	"pg_catalog.pg_foreign_server":              "its options may hold connection details",
	"information_schema.user_mapping_options":   "its options may hold passwords of foreign servers",
	"information_schema._pg_user_mappings":      "its options may hold passwords of foreign servers",
	"information_schema.foreign_server_options": "its options may hold connection details",
	"information_schema._pg_foreign_servers":    "its options may hold connection details",

	// Server files and internals.
	"pg_catalog.pg_file_settings":           "it reads the server's configuration files",
	"pg_catalog.pg_hba_file_rules":          "it reads the server's configuration files",
	"pg_catalog.pg_ident_file_mappings":     "it reads the server's configuration files",
	"pg_catalog.pg_replication_slots":       "it exposes replication state",
	"pg_catalog.pg_backend_memory_contexts": "it exposes server internals",
	"pg_catalog.pg_shmem_allocations":       "it exposes server internals",

	// Not needed by any client, and each holds something dpproxy does not
	// hand out.
	"pg_catalog.pg_locks":                        unlisted("it shows other sessions' locks and the relations they read"),
	"pg_catalog.pg_prepared_xacts":               unlisted("it lists other sessions' prepared transactions"),
	"pg_catalog.pg_prepared_statements":          unlisted("it shows the statements prepared on an upstream connection, which sessions share"),
	"pg_catalog.pg_cursors":                      unlisted("it shows the cursors open on an upstream connection, which sessions share"),
	"pg_catalog.pg_db_role_setting":              unlisted("it holds the settings of roles and databases"),
	"pg_catalog.pg_parameter_acl":                unlisted("it concerns server settings"),
	"pg_catalog.pg_config":                       unlisted("it shows how the server was built, with its file paths"),
	"pg_catalog.pg_available_extensions":         unlisted("it reads the server's extension files; pg_extension lists the installed extensions"),
	"pg_catalog.pg_available_extension_versions": unlisted("it reads the server's extension files; pg_extension lists the installed extensions"),
	"pg_catalog.pg_replication_origin":           unlisted("it exposes replication state"),
	"pg_catalog.pg_replication_origin_status":    unlisted("it exposes replication state"),
	"pg_catalog.pg_subscription_rel":             unlisted("it exposes replication state"),
	"pg_catalog.pg_shdepend":                     unlisted("it names objects of other databases"),
	// Security labels are a label provider's (sepgsql's) access policy,
	// which may classify data; no client shows them.
	"pg_catalog.pg_seclabel":   unlisted("security labels are an access policy"),
	"pg_catalog.pg_seclabels":  unlisted("security labels are an access policy"),
	"pg_catalog.pg_shseclabel": unlisted("security labels are an access policy"),
	// Which roles hold credentials for which foreign servers; and the
	// helper views behind information_schema's foreign-data views, which
	// no client reads directly.
	"information_schema.user_mappings":             unlisted("it lists which roles hold credentials for foreign servers"),
	"information_schema._pg_foreign_data_wrappers": unlisted("it is an internal helper of information_schema"),
	"information_schema._pg_foreign_table_columns": unlisted("it is an internal helper of information_schema"),
	"information_schema._pg_foreign_tables":        unlisted("it is an internal helper of information_schema"),
}

// unlisted is the reason given for a relation that is not on the
// allowlist.
func unlisted(why string) string {
	return "it is not on dpproxy's catalog allowlist (" + why + ")"
}

// statsViewPrefix reports whether a relation is one of the statistics
// views: those of tables, indexes and sequences are masked; the others
// (pg_stat_activity, pg_stat_database, pg_stat_user_functions, pg_stat_ssl,
// pg_stat_io, ...) hold database-wide counts or other sessions' activity,
// and are refused whatever a later PostgreSQL adds under these names.
func statsViewPrefix(schema, name string) bool {
	return schema == "pg_catalog" && (strings.HasPrefix(name, "pg_stat_") || strings.HasPrefix(name, "pg_statio_"))
}

// maskedRelations are the relations of pg_catalog a pass-through query
// reads masked rather than refused, because clients need them.
var maskedRelations = func() map[string]*maskPolicy {
	m := map[string]*maskPolicy{
		// Every client lists tables from pg_class (DBeaver selects c.*).
		// reltuples, relpages, relallvisible (and relallfrozen since
		// PostgreSQL 18) estimate the size of each table: they read
		// PostgreSQL's own values for a table never vacuumed or analysed.
		"pg_class": {
			keep: setOf("oid relname relnamespace reltype reloftype relowner relam relfilenode reltablespace " +
				"reltoastrelid relhasindex relisshared relpersistence relkind relnatts relchecks relhasrules " +
				"relhastriggers relhassubclass relrowsecurity relforcerowsecurity relispopulated relreplident " +
				"relispartition relrewrite relfrozenxid relminmxid relacl reloptions relpartbound"),
			consts: map[string]string{"reltuples": "-1", "relpages": "0", "relallvisible": "0", "relallfrozen": "0"},
		},
		// DBeaver's settings view and connect (select * ... where
		// name='standard_conforming_strings', reset_val of search_path),
		// pgJDBC's getMaxIndexKeys: only the rows of readableSettings, the
		// settings current_setting may read; sourcefile and sourceline
		// (server paths) are NULL.
		"pg_settings": {
			keep: setOf("name setting unit category short_desc extra_desc context vartype source min_val max_val " +
				"enumvals boot_val reset_val pending_restart"),
			rows: "lower(name) IN (" + quotedNames(readableSettings) + ")",
		},
		// psql's \du and DBeaver's role list (a.*) read pg_roles, psqlODBC's
		// SQLTablePrivileges pg_user: their rolconfig and useconfig are
		// each role's settings (ALTER ROLE ... SET), which may hold
		// anything, so they are NULL. Passwords are shown as ******** by
		// the views themselves.
		"pg_roles": {
			keep: setOf("rolname rolsuper rolinherit rolcreaterole rolcreatedb rolcanlogin rolreplication " +
				"rolconnlimit rolpassword rolvaliduntil rolbypassrls oid"),
		},
		"pg_user": {
			keep: setOf("usename usesysid usecreatedb usesuper userepl usebypassrls passwd valuntil"),
		},
	}
	// Metabase reads n_live_tup from pg_stat_user_tables; the statistics
	// views of tables, indexes and sequences keep only what identifies the
	// table or index a row is about: every counter and timestamp is NULL.
	stat := &maskPolicy{keep: setOf("relid indexrelid schemaname relname indexrelname")}
	for _, scope := range []string{"all", "user", "sys"} {
		for _, v := range []string{"pg_stat_%s_tables", "pg_stat_xact_%s_tables", "pg_statio_%s_tables",
			"pg_stat_%s_indexes", "pg_statio_%s_indexes", "pg_statio_%s_sequences"} {
			m[strings.Replace(v, "%s", scope, 1)] = stat
		}
	}
	return m
}()

// statsValueColumns held the values of extended statistics in
// pg_statistic_ext before PostgreSQL 12 (n-distinct counts, dependencies,
// most common values); pg_statistic_ext_data holds them now and is refused.
var statsValueColumns = map[string]bool{"stxndistinct": true, "stxdependencies": true, "stxmcv": true,
	"stxdndistinct": true, "stxddependencies": true, "stxdmcv": true, "stxdexpr": true}

// passThroughFuncs are the functions a pass-through query may call, with or
// without the pg_catalog qualifier: what psql's \d commands, pgJDBC's
// DatabaseMetaData, psqlODBC, SQLAlchemy, Metabase, Grafana, DBeaver and
// Superset use to browse the schema (the golden files
// rewrite/testdata/clients/ok_client_*.sql hold their queries; e2e/clients_test.go
// runs the clients), plus plain scalar builtins. None reads table sizes,
// row counts, files, settings or sequences, shows other sessions or the
// server's processes, sleeps, draws random numbers, takes locks or
// changes state. Anything not listed is refused: a new function must be
// reviewed before it is added.
var passThroughFuncs = map[string]bool{
	// session and server information
	"version": true, "current_database": true, "current_schema": true, "current_schemas": true,
	"current_user": true, "session_user": true,
	// catalog helpers
	"pg_get_userbyid": true, "format_type": true, "pg_table_is_visible": true, "pg_type_is_visible": true,
	"pg_function_is_visible": true, "pg_get_expr": true, "pg_get_constraintdef": true, "pg_get_indexdef": true,
	"pg_get_viewdef": true, "pg_get_triggerdef": true, "pg_get_function_arguments": true,
	"pg_get_function_result": true, "pg_get_function_identity_arguments": true, "obj_description": true,
	"col_description": true, "shobj_description": true, "pg_encoding_to_char": true,
	"has_table_privilege": true, "has_schema_privilege": true, "has_database_privilege": true,
	"pg_get_keywords": true, "pg_get_partkeydef": true, "pg_get_statisticsobjdef_columns": true,
	"pg_relation_is_publishable": true, "quote_ident": true,
	// (Casts are not listed: a pass-through query may cast. Metabase's
	// col_description(format('%I.%I', s, t)::regclass::oid, n) casts a
	// name to regclass, whose input function looks it up in pg_class
	// through the search path, pinned to public (PinnedSettings), and
	// fails with 42P01 for an unknown relation: an answer and an error
	// that depend on the schema only, which is not protected.)
	// psql's \d and friends: partition ancestry (relation ids only),
	// object names and visibility in the search path
	"pg_partition_ancestors": true, "pg_partition_root": true, "pg_partition_tree": true,
	"pg_get_ruledef": true, "pg_get_statisticsobjdef": true, "pg_get_serial_sequence": true,
	"pg_describe_object": true, "pg_identify_object": true,
	"pg_operator_is_visible": true, "pg_opclass_is_visible": true, "pg_opfamily_is_visible": true,
	"pg_collation_is_visible": true, "pg_conversion_is_visible": true, "pg_statistics_obj_is_visible": true,
	"pg_ts_config_is_visible": true, "pg_ts_dict_is_visible": true, "pg_ts_parser_is_visible": true,
	"pg_ts_template_is_visible": true,
	// privileges of the proxy's upstream role (Metabase, DBeaver)
	"has_column_privilege": true, "has_any_column_privilege": true, "has_sequence_privilege": true,
	"has_function_privilege": true, "has_type_privilege": true, "pg_has_role": true,
	// formatting only: the size functions that could feed it stay refused
	"pg_size_pretty": true,
	// SQLAlchemy's get_columns (Superset) builds identity options as JSON
	"json_build_object": true, "jsonb_build_object": true, "json_build_array": true, "jsonb_build_array": true,
	// arrays and aggregates
	"array_to_string": true, "array_agg": true, "string_agg": true, "unnest": true,
	"generate_subscripts": true, "array_length": true,
	// psql's \d walks publication column lists with it, psqlODBC's
	// SQLForeignKeys pg_constraint.conkey, Grafana's pickers the search
	// path; literal bounds of more than maxSeriesValues values are refused
	// (seriesBounded, passthrough.go), other bounds are bounded by
	// limits.statement_timeout like any large join of catalogs
	"generate_series": true, "array_upper": true, "array_lower": true,
	"count": true, "sum": true, "min": true, "max": true, "avg": true, "row_number": true,
	// scalar builtins (the parser writes substring/trim/position/LIKE ESCAPE as these)
	"lower": true, "upper": true, "length": true, "char_length": true, "substring": true, "substr": true,
	"trim": true, "btrim": true, "ltrim": true, "rtrim": true, "position": true, "concat": true,
	"replace": true, "split_part": true, "like_escape": true, "now": true, "current_timestamp": true,
	// string builtins of Metabase's describe-fields (format('%I.%I', ...))
	// and Grafana's table and column pickers (the search path split with
	// string_to_array, a table name with parse_ident)
	"format": true, "string_to_array": true, "parse_ident": true,
	// More string functions of tools' catalog queries (issue 14): each
	// is a pure function of its arguments, reads no table, setting or
	// file, and returns at most a constant multiple of its arguments'
	// size. quote_literal and quote_nullable quote a text as a literal
	// (Metabase and SQLAlchemy build names and defaults with them),
	// concat_ws joins names (psqlODBC's catalog.schema.table), left and
	// right cut them. regexp_replace (pickers that strip quotes or
	// prefixes from names) runs PostgreSQL's regular-expression engine,
	// which pass-through queries already reach through the ~ operator
	// (Metabase's nspname !~ '^pg_'): it checks for interrupts while
	// matching, so a catastrophic pattern is ended by
	// limits.statement_timeout like any long statement, and its result is
	// capped by PostgreSQL's 1 GB value limit, like replace's. None of
	// them is allowed on a private column (totality.go decides that).
	"quote_literal": true, "quote_nullable": true, "concat_ws": true, "left": true, "right": true,
	"regexp_replace": true,
	// Arrays of catalog queries (pg_constraint.conkey, pg_index.indkey,
	// the search path split by string_to_array): the dimensions and
	// positions of an array, and arrays built from their arguments, whose
	// size is at most the sum of their arguments' sizes. array_fill is
	// not here: a few bytes of SQL ask it for an array of up to 1 GB.
	"array_dims": true, "array_ndims": true, "cardinality": true, "array_position": true,
	"array_positions": true, "array_append": true, "array_prepend": true, "array_cat": true,
	"array_remove": true, "array_replace": true,
}

// refusedFuncReasons explain why some well-known functions are refused.
var refusedFuncReasons = map[string]string{
	"pg_relation_size":               "it reveals table sizes",
	"pg_total_relation_size":         "it reveals table sizes",
	"pg_table_size":                  "it reveals table sizes",
	"pg_indexes_size":                "it reveals table sizes",
	"pg_database_size":               "it reveals table sizes",
	"random":                         "it draws from the database's generator, which the proxy must not expose",
	"setseed":                        "it could steer sampling inside the database",
	"set_config":                     "it changes session settings",
	"current_setting":                "it reads settings (only a constant name among the server's version and formatting settings may be read)",
	"pg_show_all_settings":           "it reads every setting (pg_settings shows the readable ones)",
	"nextval":                        "it changes a sequence",
	"setval":                         "it changes a sequence",
	"pg_sleep":                       "it holds the connection",
	"pg_read_file":                   "it reads server files",
	"pg_read_binary_file":            "it reads server files",
	"pg_ls_dir":                      "it reads server files",
	"query_to_xml":                   "it runs a query given as text",
	"table_to_xml":                   "it reads a whole table",
	"pg_lock_status":                 "it shows other sessions' locks",
	"pg_blocking_pids":               "it shows other sessions' locks",
	"pg_stat_get_activity":           "it shows other sessions' queries",
	"pg_get_backend_memory_contexts": "it exposes server internals",
}

// infoSchemaFuncs are information_schema's helper functions a pass-through
// query may call (qualified): pgJDBC's getPrimaryKeys, getImportedKeys and
// getIndexInfo and Metabase's describe-indexes unnest key column numbers
// with _pg_expandarray.
var infoSchemaFuncs = map[string]bool{"_pg_expandarray": true}
