package rewrite

import (
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// passThroughFuncs are the functions a pass-through query may call, with or
// without the pg_catalog qualifier: what psql's \d commands, pgJDBC's
// DatabaseMetaData, Metabase, DBeaver and Superset use to browse the schema
// (the golden files rewrite/testdata/ok_client_*.sql hold their queries;
// e2e/clients_test.go runs the clients), plus plain scalar builtins. None
// reads table sizes, row counts, files, settings or sequences, sleeps,
// draws random numbers, takes locks or changes state. Anything not listed
// is refused: a new function must be reviewed before it is added.
var passThroughFuncs = map[string]bool{
	// session and server information
	"version": true, "current_database": true, "current_schema": true, "current_schemas": true,
	"current_user": true, "session_user": true, "pg_backend_pid": true,
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
}

// refusedFuncReasons explain why some well-known functions are refused.
var refusedFuncReasons = map[string]string{
	"pg_relation_size":       "it reveals table sizes",
	"pg_total_relation_size": "it reveals table sizes",
	"pg_table_size":          "it reveals table sizes",
	"pg_indexes_size":        "it reveals table sizes",
	"pg_database_size":       "it reveals table sizes",
	"random":                 "it draws from the database's generator, which the proxy must not expose",
	"setseed":                "it could steer sampling inside the database",
	"set_config":             "it changes session settings",
	"current_setting":        "it reads settings (only a constant name among the server's version and formatting settings may be read)",
	"nextval":                "it changes a sequence",
	"setval":                 "it changes a sequence",
	"pg_sleep":               "it holds the connection",
	"pg_read_file":           "it reads server files",
	"pg_read_binary_file":    "it reads server files",
	"pg_ls_dir":              "it reads server files",
	"query_to_xml":           "it runs a query given as text",
	"table_to_xml":           "it reads a whole table",
}

// infoSchemaFuncs are information_schema's helper functions a pass-through
// query may call (qualified): pgJDBC's getPrimaryKeys, getImportedKeys and
// getIndexInfo unnest key column numbers with _pg_expandarray.
var infoSchemaFuncs = map[string]bool{"_pg_expandarray": true}

// readableSettings are the settings current_setting may read in a
// pass-through query: what clients ask for on connect (the server's
// version and formatting). Others may hold anything an operator put in
// them (custom settings, file paths), so current_setting of any other or
// a computed name is refused.
var readableSettings = map[string]bool{
	"server_version": true, "server_version_num": true, "server_encoding": true, "client_encoding": true,
	"datestyle": true, "intervalstyle": true, "timezone": true, "standard_conforming_strings": true,
	"integer_datetimes": true, "transaction_isolation": true, "default_transaction_isolation": true,
	"transaction_read_only": true, "default_transaction_read_only": true, "search_path": true,
	"max_identifier_length": true, "max_index_keys": true, "application_name": true,
	"extra_float_digits": true, "lc_collate": true, "lc_ctype": true, "bytea_output": true,
}

// funcAllowed checks a function call of a pass-through query.
func funcAllowed(fc *pg_query.FuncCall) error {
	schema, name := funcName(fc)
	if schema == "information_schema" && infoSchemaFuncs[name] {
		return nil
	}
	if schema != "" && schema != "pg_catalog" {
		return reject(CodeForbidden, fc.Location, "function %s.%s is not allowed: only pg_catalog functions may be called", schema, name)
	}
	if passThroughFuncs[name] {
		return nil
	}
	if name == "current_setting" && len(fc.Args) > 0 {
		if c := fc.Args[0].GetAConst(); c != nil && readableSettings[strings.ToLower(c.GetSval().GetSval())] {
			return nil
		}
	}
	if reason, ok := refusedFuncReasons[name]; ok {
		return reject(CodeForbidden, fc.Location, "function %s is not allowed: %s", name, reason)
	}
	return reject(CodeForbidden, fc.Location, "function %s is not allowed", name).
		withHint("dpproxy allows only a list of catalog and scalar functions in queries that do not read private tables.")
}

// funcName splits a function name into schema ("" if unqualified) and name.
func funcName(fc *pg_query.FuncCall) (schema, name string) {
	parts := make([]string, 0, len(fc.Funcname))
	for _, p := range fc.Funcname {
		parts = append(parts, p.GetString_().GetSval())
	}
	switch len(parts) {
	case 0:
		return "", ""
	case 1:
		return "", parts[0]
	}
	return strings.Join(parts[:len(parts)-1], "."), parts[len(parts)-1]
}

// statsValueColumns held the values of extended statistics in
// pg_statistic_ext before PostgreSQL 12 (n-distinct counts, dependencies,
// most common values); pg_statistic_ext_data holds them now and is refused.
var statsValueColumns = map[string]bool{"stxndistinct": true, "stxdependencies": true, "stxmcv": true,
	"stxdndistinct": true, "stxddependencies": true, "stxdmcv": true, "stxdexpr": true}

// noWrites refuses anything in a query that writes or locks.
func noWrites(n *pg_query.Node) error {
	var err error
	walk(n.ProtoReflect(), func(m protoreflect.Message) bool {
		if err != nil {
			return false
		}
		switch x := m.Interface().(type) {
		case *pg_query.IntoClause:
			err = reject(CodeForbidden, x.GetRel().GetLocation(), "SELECT INTO is refused: writes and DDL are refused")
		case *pg_query.LockingClause:
			err = reject(CodeForbidden, -1, "FOR UPDATE/SHARE is refused: it locks rows")
		case *pg_query.InsertStmt, *pg_query.UpdateStmt, *pg_query.DeleteStmt, *pg_query.MergeStmt:
			err = reject(CodeForbidden, -1, "writes and DDL are refused: data-modifying statements in WITH are not allowed")
		}
		return err == nil
	})
	return err
}

// selectStmt analyses a SELECT (or VALUES, TABLE, set operation).
func (a *Analyzer) selectStmt(n *pg_query.Node, text string) (*Statement, error) {
	if err := noWrites(n); err != nil {
		return nil, err
	}
	refs := collectRels(n.ProtoReflect())
	if err := a.resolve(refs); err != nil {
		return nil, err
	}
	if hasPrivate(refs) {
		plan, err := a.plan(n.GetSelectStmt(), refs)
		if err != nil {
			return nil, err
		}
		return &Statement{Kind: KindPrivate, SQL: text, Plan: plan}, nil
	}
	sql, err := a.passThrough(n)
	if err != nil {
		return nil, err
	}
	if a.verbatim(n, refs) {
		return &Statement{Kind: KindPassThrough, SQL: text, Verbatim: true}, nil
	}
	return &Statement{Kind: KindPassThrough, SQL: sql}, nil
}

// verbatim reports whether a validated pass-through SELECT may be sent as
// the client wrote it: no relation it reads is masked (which needs the
// rewrite), every unqualified name resolves upstream (search_path public,
// pg_catalog implicitly first) to what resolve assumed, and no check
// depends on a constant's value (current_setting's name is checked).
func (a *Analyzer) verbatim(n *pg_query.Node, refs []*relRef) bool {
	if a.opts.CatalogRelations == nil {
		return false
	}
	for _, r := range refs {
		if r.class == relCTE {
			continue
		}
		if r.schema == "pg_catalog" && a.masks[r.name] != nil {
			return false
		}
		if r.rv.Schemaname != "" {
			continue
		}
		if inCatalog := a.opts.CatalogRelations[r.name]; inCatalog != (r.schema == "pg_catalog") {
			return false
		}
	}
	ok := true
	walk(n.ProtoReflect(), func(m protoreflect.Message) bool {
		if fc, isCall := m.Interface().(*pg_query.FuncCall); isCall {
			if name := fc.Funcname[len(fc.Funcname)-1].GetString_().GetSval(); name == "current_setting" {
				ok = false
			}
		}
		return ok
	})
	return ok
}

func hasPrivate(refs []*relRef) bool {
	for _, r := range refs {
		if r.class == relPrivate {
			return true
		}
	}
	return false
}

// explainStmt allows plain EXPLAIN of a pass-through query only.
func (a *Analyzer) explainStmt(n *pg_query.ExplainStmt) (*Statement, error) {
	for _, o := range n.Options {
		d := o.GetDefElem()
		if d != nil && strings.EqualFold(d.Defname, "analyze") && optionOn(d.Arg) {
			return nil, reject(CodeForbidden, d.Location, "EXPLAIN ANALYZE is refused: it runs the query and reports actual row counts")
		}
	}
	q := n.Query
	if q.GetSelectStmt() == nil {
		return nil, reject(CodeForbidden, -1, "writes and DDL are refused: EXPLAIN of %s is not allowed", stmtName(q))
	}
	if err := noWrites(q); err != nil {
		return nil, err
	}
	refs := collectRels(q.ProtoReflect())
	if err := a.resolve(refs); err != nil {
		return nil, err
	}
	for _, r := range refs {
		if r.class == relPrivate {
			return nil, reject(CodeForbidden, r.rv.Location, "EXPLAIN of a private table is refused: row estimates reveal counts; use EXPLAIN DP").
				withDetail("%s is private.", r.qualified())
		}
	}
	sql, err := a.passThrough(&pg_query.Node{Node: &pg_query.Node_ExplainStmt{ExplainStmt: n}})
	if err != nil {
		return nil, err
	}
	return &Statement{Kind: KindPassThrough, SQL: sql}, nil
}

// optionOn reports whether an EXPLAIN option is on: no argument, or any
// argument other than false/off/0.
func optionOn(arg *pg_query.Node) bool {
	if arg == nil {
		return true
	}
	if c := arg.GetAConst(); c != nil {
		switch strings.ToLower(constString(c)) {
		case "false", "off", "0", "no":
			return false
		}
	}
	return true
}

// passThrough validates a query that reads no private table and returns it
// deparsed with every relation qualified by its schema, so that the
// upstream resolves each name to what was checked here whatever its
// search_path, and with the catalogs that count rows masked (mask.go).
func (a *Analyzer) passThrough(n *pg_query.Node) (string, error) {
	var err error
	walk(n.ProtoReflect(), func(m protoreflect.Message) bool {
		if err != nil {
			return false
		}
		switch x := m.Interface().(type) {
		case *pg_query.FuncCall:
			err = funcAllowed(x)
		case *pg_query.ColumnRef:
			err = passThroughColumn(x)
		}
		return err == nil
	})
	if err != nil {
		return "", err
	}
	c := proto.Clone(n).(*pg_query.Node)
	crefs := collectRels(c.ProtoReflect())
	if err := a.resolve(crefs); err != nil {
		return "", err
	}
	for _, r := range crefs {
		if r.class != relCTE {
			r.rv.Schemaname = r.schema
		}
	}
	if err := a.maskCatalogs(c); err != nil {
		return "", err
	}
	sql, err := deparseStmt(c)
	if err != nil {
		return "", err
	}
	if err := faithful(c, sql); err != nil {
		return "", err
	}
	return sql, nil
}

// passThroughColumn checks a column reference of a pass-through query.
// Row-count estimates need no check: every relation holding them is read
// masked.
func passThroughColumn(c *pg_query.ColumnRef) error {
	if len(c.Fields) == 0 {
		return nil
	}
	name := c.Fields[len(c.Fields)-1].GetString_().GetSval()
	if statsValueColumns[name] {
		return reject(CodeForbidden, c.Location, "column %s is refused: it holds statistics of data values", name)
	}
	return nil
}
