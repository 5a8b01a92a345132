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

// rowEstimateColumns of pg_class estimate row counts of tables.
var rowEstimateColumns = map[string]bool{"reltuples": true, "relpages": true, "relallvisible": true}

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
	sql, err := a.passThrough(n, refs)
	if err != nil {
		return nil, err
	}
	return &Statement{Kind: KindPassThrough, SQL: sql}, nil
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
	sql, err := a.passThrough(&pg_query.Node{Node: &pg_query.Node_ExplainStmt{ExplainStmt: n}}, refs)
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
// search_path.
func (a *Analyzer) passThrough(n *pg_query.Node, refs []*relRef) (string, error) {
	pgClass := map[string]bool{}
	pgClassRV := map[*pg_query.RangeVar]bool{}
	for _, r := range refs {
		if r.class == relCatalog && r.schema == "pg_catalog" && r.name == "pg_class" {
			pgClassRV[r.rv] = true
			pgClass[r.rv.Relname] = true
			if al := r.rv.Alias; al != nil {
				pgClass[al.Aliasname] = true
				if len(al.Colnames) > 0 {
					return "", reject(CodeForbidden, r.rv.Location, "column aliases on pg_class are refused: they could rename row-count estimates")
				}
			}
		}
	}
	// A join whose tree holds pg_class exposes its columns under the
	// join's alias (j.*, a whole-row j): treat the alias as pg_class.
	walk(n.ProtoReflect(), func(m protoreflect.Message) bool {
		if j, ok := m.Interface().(*pg_query.JoinExpr); ok && j.Alias != nil && reachesPgClass(j, pgClassRV) {
			pgClass[j.Alias.Aliasname] = true
		}
		return true
	})
	// safeStars are unqualified * in a select list whose FROM reads pg_class
	// only through subqueries: those name their columns explicitly, and
	// each is checked (pgJDBC's getColumns wraps its catalog query in
	// SELECT * FROM (...) c).
	safeStars := map[*pg_query.ColumnRef]bool{}
	var err error
	walk(n.ProtoReflect(), func(m protoreflect.Message) bool {
		if err != nil {
			return false
		}
		switch x := m.Interface().(type) {
		case *pg_query.SelectStmt:
			if !fromReachesPgClass(x.FromClause, pgClassRV) {
				for _, t := range x.TargetList {
					if c := t.GetResTarget().GetVal().GetColumnRef(); c != nil && len(c.Fields) == 1 && c.Fields[0].GetAStar() != nil {
						safeStars[c] = true
					}
				}
			}
		case *pg_query.FuncCall:
			err = funcAllowed(x)
		case *pg_query.ColumnRef:
			err = passThroughColumn(x, pgClass, safeStars[x])
		case *pg_query.JoinExpr:
			if len(pgClass) > 0 && x.Alias != nil && len(x.Alias.Colnames) > 0 {
				err = reject(CodeForbidden, -1, "column aliases on a join with pg_class are refused: they could rename row-count estimates")
			}
			// NATURAL and USING compare columns by name without a
			// ColumnRef: a join on reltuples would test its value.
			if len(pgClass) > 0 && x.IsNatural {
				err = reject(CodeForbidden, -1, "NATURAL JOIN with pg_class is refused: it could compare row-count estimates; name the join columns in ON")
			}
			for _, u := range x.UsingClause {
				if name := u.GetString_().GetSval(); rowEstimateColumns[name] && err == nil {
					err = reject(CodeForbidden, -1, "JOIN ... USING (%s) is refused: it compares an estimate of the number of rows of a table", name)
				}
			}
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
	sql, err := deparseStmt(c)
	if err != nil {
		return "", err
	}
	if err := faithful(c, sql); err != nil {
		return "", err
	}
	return sql, nil
}

// fromReachesPgClass reports whether a FROM list reads pg_class other than
// through a subquery.
func fromReachesPgClass(from []*pg_query.Node, pgClassRV map[*pg_query.RangeVar]bool) bool {
	for _, f := range from {
		if reachesPgClass(f, pgClassRV) {
			return true
		}
	}
	return false
}

func reachesPgClass(n proto.Message, pgClassRV map[*pg_query.RangeVar]bool) bool {
	found := false
	walk(n.ProtoReflect(), func(m protoreflect.Message) bool {
		switch x := m.Interface().(type) {
		case *pg_query.RangeVar:
			found = found || pgClassRV[x]
		case *pg_query.RangeSubselect:
			return false
		}
		return !found
	})
	return found
}

// passThroughColumn checks a column reference of a pass-through query.
// safeStar says an unqualified * expands no column of pg_class.
func passThroughColumn(c *pg_query.ColumnRef, pgClass map[string]bool, safeStar bool) error {
	if len(c.Fields) == 0 {
		return nil
	}
	last := c.Fields[len(c.Fields)-1]
	if last.GetAStar() != nil {
		qualifier := ""
		if len(c.Fields) > 1 {
			qualifier = c.Fields[len(c.Fields)-2].GetString_().GetSval()
		}
		if qualifier == "" && safeStar || qualifier != "" && !pgClass[qualifier] {
			return nil
		}
		if len(pgClass) > 0 {
			return reject(CodeForbidden, c.Location, "SELECT * over pg_class is refused: it would return reltuples, an estimate of row counts").
				withHint("Name the columns you need.")
		}
		return nil
	}
	name := last.GetString_().GetSval()
	if rowEstimateColumns[name] {
		return reject(CodeForbidden, c.Location, "column %s is refused: it estimates the number of rows of a table", name)
	}
	if statsValueColumns[name] {
		return reject(CodeForbidden, c.Location, "column %s is refused: it holds statistics of data values", name)
	}
	if pgClass[name] {
		return reject(CodeForbidden, c.Location, "whole-row reference %s to pg_class is refused: it would return reltuples", name)
	}
	return nil
}
