package rewrite

import (
	"math"
	"strconv"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// funcAllowed checks a function call of a pass-through query.
func funcAllowed(fc *pg_query.FuncCall) error {
	schema, name := funcName(fc)
	if schema == "information_schema" && infoSchemaFuncs[name] {
		return nil
	}
	if schema != "" && schema != "pg_catalog" {
		return reject(pgerr.InsufficientPrivilege, fc.Location, "function %s.%s is not allowed: only pg_catalog functions may be called", schema, name)
	}
	if name == "generate_series" {
		return seriesBounded(fc)
	}
	if name == "pg_backend_pid" && len(fc.Args) == 0 {
		return nil // the session's own id, as the client knows it (sessionuser.go)
	}
	if passThroughFuncs[name] {
		return nil
	}
	// What a hoisted constant may compute (dates, numbers, strings:
	// no side effect, no table, setting or file, bounded memory and
	// time) may also be computed over catalogs and public tables:
	// Metabase's binning (floor) and time breakouts (date_trunc, extract)
	// of a public table's columns.
	if constFuncs[name] {
		return nil
	}
	if name == "current_setting" && len(fc.Args) > 0 {
		if c := fc.Args[0].GetAConst(); c != nil && (readableSettings[strings.ToLower(c.GetSval().GetSval())] || isAnalystSetting(c)) {
			return nil
		}
	}
	if reason, ok := refusedFuncReasons[name]; ok {
		return reject(pgerr.InsufficientPrivilege, fc.Location, "function %s is not allowed: %s", name, reason)
	}
	return reject(pgerr.InsufficientPrivilege, fc.Location, "function %s is not allowed", name).
		WithHint("dpproxy allows only a list of catalog and scalar functions in queries that do not read private tables.")
}

// maxSeriesValues bounds generate_series with literal bounds in a
// pass-through query. PostgreSQL materialises a set-returning function in
// FROM before reading it: generate_series(1, 10000000) writes 140 MB of
// temporary files (measured, PostgreSQL 15, work_mem 4MB), about 250 MB a
// second until limits.statement_timeout ends it, and temp_file_limit is
// unlimited by default. Catalog queries walk arrays of a few elements.
// Bounds that are not literals (array_lower(conkey, 1), the search path's
// length) are bounded by the statement timeout alone; an operator who
// wants a hard bound sets temp_file_limit for the query role.
const maxSeriesValues = 10_000_000

// seriesBounded refuses generate_series whose literal number bounds (and
// step) give more than maxSeriesValues values.
func seriesBounded(fc *pg_query.FuncCall) error {
	for _, a := range fc.Args {
		if a.GetNamedArgExpr() != nil {
			// PostgreSQL's generate_series has no parameter names, and
			// a bound passed by name is not read below (red team,
			// issue 17).
			return reject(pgerr.FeatureNotSupported, fc.Location, "generate_series with named arguments is not supported")
		}
	}
	if len(fc.Args) < 2 || len(fc.Args) > 3 {
		return nil
	}
	var v [3]float64
	v[2] = 1
	for i, a := range fc.Args {
		c := a.GetAConst()
		if c == nil {
			return nil
		}
		switch {
		case c.GetIval() != nil:
			v[i] = float64(c.GetIval().GetIval())
		case c.GetFval() != nil:
			f, err := strconv.ParseFloat(c.GetFval().GetFval(), 64)
			if err != nil {
				return nil
			}
			v[i] = f
		default:
			return nil // a timestamp series, NULL: not counted here
		}
	}
	start, stop, step := v[0], v[1], v[2]
	if step == 0 || math.IsInf(start, 0) || math.IsInf(stop, 0) || math.IsInf(step, 0) {
		return nil // PostgreSQL's own error, or no number
	}
	n := math.Floor((stop-start)/step) + 1
	if n > maxSeriesValues {
		return reject(pgerr.ProgramLimitExceeded, fc.Location, "generate_series of %.0f values exceeds dpproxy's limit of %d in queries that read no private table", n, maxSeriesValues).
			WithHint("Catalog queries need short series; ask for at most %d values.", maxSeriesValues)
	}
	return nil
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

// noWrites refuses anything in a query that writes or locks.
func noWrites(n *pg_query.Node) error {
	var err error
	walk(n.ProtoReflect(), func(m protoreflect.Message) bool {
		if err != nil {
			return false
		}
		switch x := m.Interface().(type) {
		case *pg_query.IntoClause:
			err = reject(pgerr.InsufficientPrivilege, x.GetRel().GetLocation(), "SELECT INTO is refused: writes and DDL are refused")
		case *pg_query.LockingClause:
			err = reject(pgerr.InsufficientPrivilege, -1, "FOR UPDATE/SHARE is refused: it locks rows")
		case *pg_query.InsertStmt, *pg_query.UpdateStmt, *pg_query.DeleteStmt, *pg_query.MergeStmt:
			err = reject(pgerr.InsufficientPrivilege, -1, "writes and DDL are refused: data-modifying statements in WITH are not allowed")
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
			return nil, withToolHint(err, n.GetSelectStmt()) // toolhints.go
		}
		return &Statement{Kind: KindPrivate, SQL: text, Plan: plan}, nil
	}
	sql, err := a.passThrough(n)
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
			return nil, reject(pgerr.InsufficientPrivilege, d.Location, "EXPLAIN ANALYZE is refused: it runs the query and reports actual row counts")
		}
	}
	q := n.Query
	if q.GetSelectStmt() == nil {
		return nil, reject(pgerr.InsufficientPrivilege, -1, "writes and DDL are refused: EXPLAIN of %s is not allowed", stmtName(q))
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
			return nil, reject(pgerr.InsufficientPrivilege, r.rv.Location, "EXPLAIN of a private table is refused: row estimates reveal counts; use EXPLAIN DP").
				WithDetail("%s is private.", r.qualified())
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
		case *pg_query.JsonObjectConstructor, *pg_query.JsonArrayConstructor, *pg_query.JsonArrayQueryConstructor,
			*pg_query.JsonObjectAgg, *pg_query.JsonArrayAgg, *pg_query.JsonIsPredicate, *pg_query.JsonValueExpr:
			// PostgreSQL 16 syntax, which pg_query parses as constructor
			// nodes, not function calls: deparsed, an older upstream would
			// read JSON_ARRAY(...) as a call of whatever function named
			// json_array the search path finds, unchecked.
			err = reject(pgerr.FeatureNotSupported, -1, "SQL/JSON constructors and IS JSON are not supported; use json_build_array, json_build_object or json_agg")
		case *pg_query.XmlExpr, *pg_query.XmlSerialize:
			// XMLPARSE and friends call libxml on text: not on the
			// function allowlist either.
			err = reject(pgerr.InsufficientPrivilege, -1, "XML functions are not allowed through dpproxy")
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
	substituteSessionUser(c) // sessionuser.go
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
		return reject(pgerr.InsufficientPrivilege, c.Location, "column %s is refused: it holds statistics of data values", name)
	}
	return nil
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
