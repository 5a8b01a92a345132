package rewrite

import (
	"sort"
	"strings"
)

// This file holds every list that decides what a pass-through query (one
// that reads no private table) may read of PostgreSQL's catalogs and which
// functions it may call, so that a review of catalog access needs no other
// file. Everything is an allowlist: a relation, column, setting or function
// that is not listed here is refused with 42501, so whatever a later
// PostgreSQL adds stays refused until someone reviews it.
//
// The rule behind the lists: the schema is not protected (docs/threat-
// model.md), so a catalog that describes objects (their names, columns,
// types, keys, definitions, owners and privileges) may be read; one that
// holds data values, counts or sizes of rows, other sessions' state,
// settings, server files or credentials may not, or only masked
// (mask.go). Each allowed group names the clients that read it; their
// queries are the golden files testdata/ok_client_*.sql, and
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

// catalogRefusal returns why a pass-through query may not read the
// relation schema.name of pg_catalog or information_schema, or "" if it
// may (as it is, or masked).
func catalogRefusal(schema, name string) string {
	q := schema + "." + name
	if catalogAllowlist[q] || schema == "pg_catalog" && maskedRelations[name] != nil {
		return ""
	}
	if why, ok := refusedRelations[q]; ok {
		return why
	}
	if statsViewPrefix(schema, name) {
		return "statistics views hold counts of table rows or other sessions' activity"
	}
	return unlisted("it lists what clients need to browse the schema")
}

// relations builds a set of "schema.name" from pairs of a schema and a
// space-separated list of names.
func relations(pairs ...string) map[string]bool {
	m := map[string]bool{}
	for i := 0; i+1 < len(pairs); i += 2 {
		for _, name := range strings.Fields(pairs[i+1]) {
			m[pairs[i]+"."+name] = true
		}
	}
	return m
}

// maskPolicy says how a masked relation is read (mask.go): through a
// subquery with the relation's columns in the same order, where the
// columns in keep are themselves, those in consts a constant, every other
// one NULL (a column a later PostgreSQL adds is NULL until reviewed), and
// only the rows that meet rows ("" for all).
type maskPolicy struct {
	keep   map[string]bool
	consts map[string]string
	rows   string // an SQL condition on the relation's columns
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

// quotedNames lists a set's names as SQL string literals, sorted. The
// names are constants of this file made of letters and _ only
// (TestReadSettingsMasked).
func quotedNames(set map[string]bool) string {
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, "'"+n+"'")
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// statsValueColumns held the values of extended statistics in
// pg_statistic_ext before PostgreSQL 12 (n-distinct counts, dependencies,
// most common values); pg_statistic_ext_data holds them now and is refused.
var statsValueColumns = map[string]bool{"stxndistinct": true, "stxdependencies": true, "stxmcv": true,
	"stxdndistinct": true, "stxddependencies": true, "stxdmcv": true, "stxdexpr": true}

// passThroughFuncs are the functions a pass-through query may call, with or
// without the pg_catalog qualifier: what psql's \d commands, pgJDBC's
// DatabaseMetaData, psqlODBC, SQLAlchemy, Metabase, Grafana, DBeaver and
// Superset use to browse the schema (the golden files
// rewrite/testdata/ok_client_*.sql hold their queries; e2e/clients_test.go
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
	// psql's \d walks publication column lists with it; like any large
	// join of catalogs, a huge series is bounded by limits.statement_timeout
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
	"pg_backend_pid":                 "it identifies the upstream connection, which sessions share",
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
