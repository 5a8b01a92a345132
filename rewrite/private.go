package rewrite

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dpproxy/dpproxy/conf"
)

// systemColumns identify individual rows (or reveal physical layout).
var systemColumns = map[string]bool{
	"ctid": true, "xmin": true, "xmax": true, "cmin": true, "cmax": true, "tableoid": true, "oid": true,
}

// knownAggregates are aggregates of PostgreSQL that are not supported yet
// on private tables: they get a 0A000 rather than a 42501.
var knownAggregates = map[string]bool{
	"min": true, "max": true, "stddev": true, "stddev_samp": true, "stddev_pop": true, "variance": true,
	"var_samp": true, "var_pop": true, "percentile_cont": true, "percentile_disc": true, "mode": true,
	"array_agg": true, "string_agg": true, "bool_and": true, "bool_or": true, "every": true,
	"bit_and": true, "bit_or": true, "json_agg": true, "jsonb_agg": true, "corr": true, "covar_pop": true,
	"covar_samp": true, "regr_count": true, "median": true,
}

// planner holds what is known while one private query is checked.
type planner struct {
	table *conf.Table
	rv    *pg_query.RangeVar
	// refName is how columns may be qualified: the alias, or the table name.
	refName string
	// keys are the GROUP BY columns and the nodes to print them with.
	keys     []GroupKey
	keyNodes []*pg_query.Node
	// aggArgs are the argument columns of Plan.Aggregates (nil for count(*)).
	aggArgs []*pg_query.Node
}

// plan checks that sel is the supported shape of a query over one private
// table and rewrites it.
func (a *Analyzer) plan(sel *pg_query.SelectStmt, refs []*relRef) (*Plan, error) {
	var priv *relRef
	for _, r := range refs {
		if r.class == relPrivate {
			priv = r
			break
		}
	}
	name := priv.qualified()
	if sel == nil {
		return nil, reject(CodeUnsupported, priv.rv.Location, "private table %s may only be read by a SELECT", name)
	}
	if sel.WithClause != nil {
		return nil, reject(CodeUnsupported, sel.WithClause.Location, "WITH queries (CTEs) over private table %s are not supported yet", name)
	}
	if sel.Op != pg_query.SetOperation_SETOP_NONE {
		return nil, reject(CodeUnsupported, priv.rv.Location, "set operations (UNION, INTERSECT, EXCEPT) over private table %s are not supported yet", name)
	}
	if len(sel.FromClause) > 1 {
		return nil, reject(CodeUnsupported, priv.rv.Location, "joins with a private table are not supported yet (%s)", name)
	}
	var from *pg_query.RangeVar
	if len(sel.FromClause) == 1 {
		switch f := sel.FromClause[0].Node.(type) {
		case *pg_query.Node_JoinExpr:
			return nil, reject(CodeUnsupported, priv.rv.Location, "joins with a private table are not supported yet (%s)", name)
		case *pg_query.Node_RangeVar:
			from = f.RangeVar
		}
	}
	for _, r := range refs {
		if r.rv == from {
			continue
		}
		if r.class == relPrivate {
			return nil, reject(CodeUnsupported, r.rv.Location, "private table %s may only be read directly in the FROM clause of the outer query: subqueries, CTEs and joins over it are not supported yet", r.qualified())
		}
		return nil, reject(CodeUnsupported, r.rv.Location, "relation %s cannot be read in a query over private table %s: subqueries and joins are not supported yet", r.qualified(), name)
	}
	if from == nil {
		return nil, reject(CodeUnsupported, priv.rv.Location, "private table %s may only be read directly in the FROM clause of the outer query", name)
	}
	if from.Alias != nil && len(from.Alias.Colnames) > 0 {
		return nil, reject(CodeUnsupported, from.Location, "column aliases on private table %s are not supported", name)
	}
	switch {
	case len(sel.DistinctClause) > 0:
		return nil, reject(CodeUnsupported, -1, "SELECT DISTINCT over private table %s is not supported yet; use GROUP BY", name)
	case sel.HavingClause != nil:
		return nil, reject(CodeUnsupported, -1, "HAVING is not supported yet")
	case len(sel.WindowClause) > 0:
		return nil, reject(CodeUnsupported, -1, "WINDOW clauses are not supported on private table %s", name)
	case sel.LimitOption == pg_query.LimitOption_LIMIT_OPTION_WITH_TIES:
		return nil, reject(CodeUnsupported, -1, "FETCH ... WITH TIES is not supported on private table %s", name)
	case len(sel.TargetList) == 0:
		return nil, reject(CodeUnsupported, -1, "a query over private table %s must select group keys or aggregates", name)
	}

	p := &planner{table: priv.table, rv: from, refName: from.Relname}
	if from.Alias != nil {
		p.refName = from.Alias.Aliasname
	}
	if err := p.noSystemColumns(sel); err != nil {
		return nil, err
	}
	plan := &Plan{
		Table:   priv.table,
		MaxRows: priv.table.MaxRowsPerUnit,
		Limit:   -1,
	}
	if err := p.groupBy(sel); err != nil {
		return nil, err
	}
	if err := p.targets(sel, plan); err != nil {
		return nil, err
	}
	if sel.WhereClause != nil {
		if _, err := p.where(sel.WhereClause); err != nil {
			return nil, err
		}
	}
	if err := p.orderBy(sel, plan); err != nil {
		return nil, err
	}
	var err error
	if plan.Limit, err = limitValue(sel.LimitCount, "LIMIT", CodeBadLimit, -1); err != nil {
		return nil, err
	}
	if plan.Offset, err = limitValue(sel.LimitOffset, "OFFSET", CodeBadOffset, 0); err != nil {
		return nil, err
	}
	plan.NumParams = numParams(sel)
	p.bounds(plan)
	orig := &pg_query.Node{Node: &pg_query.Node_SelectStmt{SelectStmt: sel}}
	if plan.DescribeSQL, err = deparseStmt(orig); err != nil {
		return nil, err
	}
	if err := faithful(orig, plan.DescribeSQL); err != nil {
		return nil, err
	}
	if plan.SQL, err = p.sql(sel, plan); err != nil {
		return nil, err
	}
	plan.GroupKeys = p.keys
	return plan, nil
}

// bounds sets MaxGroups and PartitionSelection (docs/design.md, Sensitivity).
func (p *planner) bounds(plan *Plan) {
	l0 := p.table.MaxGroupsPerUnit
	if len(p.keys) == 0 {
		plan.MaxGroups = 1
		return
	}
	combos := int64(1)
	for _, k := range p.keys {
		if k.PublicValues == nil {
			plan.PartitionSelection = true
			plan.MaxGroups = l0
			return
		}
		n := int64(len(k.PublicValues))
		if combos > math.MaxInt64/n {
			combos = math.MaxInt64
		} else {
			combos *= n
		}
	}
	plan.MaxGroups = min(l0, combos)
}

func (p *planner) noSystemColumns(sel *pg_query.SelectStmt) error {
	var err error
	walk(sel.ProtoReflect(), func(m protoreflect.Message) bool {
		if err != nil {
			return false
		}
		if c, ok := m.Interface().(*pg_query.ColumnRef); ok && len(c.Fields) > 0 {
			if name := c.Fields[len(c.Fields)-1].GetString_().GetSval(); systemColumns[name] {
				err = reject(CodeForbidden, c.Location, "system column %s is refused on private table %s: it identifies individual rows", name, p.table.QualifiedName())
			}
		}
		return err == nil
	})
	return err
}

// column resolves a column reference of the private table to its name,
// refusing *, whole-row references and references to other relations.
func (p *planner) column(c *pg_query.ColumnRef) (string, error) {
	n := len(c.Fields)
	if n == 0 {
		return "", reject(CodeUnsupported, c.Location, "empty column reference")
	}
	if c.Fields[n-1].GetAStar() != nil {
		return "", reject(CodeForbidden, c.Location, "SELECT * would return individual rows of private table %s", p.table.QualifiedName()).
			withHint("Select group keys and aggregates such as count(*), sum(col), avg(col).")
	}
	quals := make([]string, 0, n-1)
	for _, f := range c.Fields[:n-1] {
		quals = append(quals, f.GetString_().GetSval())
	}
	name := c.Fields[n-1].GetString_().GetSval()
	ok := false
	switch len(quals) {
	case 0:
		ok = true
		if name == p.refName {
			return "", reject(CodeForbidden, c.Location, "whole-row reference %s would return individual rows of private table %s", name, p.table.QualifiedName())
		}
	case 1:
		ok = quals[0] == p.refName
	case 2:
		ok = p.rv.Alias == nil && quals[0] == p.table.Schema && quals[1] == p.table.Name
	}
	if !ok || name == "" {
		return "", reject(CodeBadColumnRef, c.Location, "column reference %s does not refer to table %s", strings.Join(append(quals, name), "."), p.refName)
	}
	return name, nil
}

func (p *planner) groupBy(sel *pg_query.SelectStmt) error {
	for _, g := range sel.GroupClause {
		var ref *pg_query.ColumnRef
		switch x := g.Node.(type) {
		case *pg_query.Node_ColumnRef:
			ref = x.ColumnRef
		case *pg_query.Node_AConst:
			pos, ok := intConst(x.AConst)
			if !ok {
				return reject(CodeUnsupported, x.AConst.Location, "GROUP BY accepts columns or output positions only")
			}
			if pos < 1 || pos > int64(len(sel.TargetList)) {
				return reject(CodeBadPosition, x.AConst.Location, "GROUP BY position %d is not in select list", pos)
			}
			val := sel.TargetList[pos-1].GetResTarget().GetVal()
			if ref = val.GetColumnRef(); ref == nil {
				return reject(CodeUnsupported, x.AConst.Location, "GROUP BY %d must refer to a column of the table", pos)
			}
		case *pg_query.Node_GroupingSet:
			return reject(CodeUnsupported, x.GroupingSet.Location, "GROUPING SETS, ROLLUP and CUBE are not supported on private tables")
		default:
			return reject(CodeUnsupported, -1, "GROUP BY %s is not supported yet: group by plain columns of the table", describe(g))
		}
		name, err := p.column(ref)
		if err != nil {
			return err
		}
		if name == p.table.PrivacyUnit {
			return reject(CodeForbidden, ref.Location, "GROUP BY %s is refused: grouping by the privacy unit would release per-person values", name)
		}
		if p.keyIndex(name) >= 0 {
			continue
		}
		k := GroupKey{Column: name}
		if col := p.table.Columns[name]; col != nil && col.PublicValues != nil {
			k.PublicValues = col.PublicValues
		}
		p.keys = append(p.keys, k)
		p.keyNodes = append(p.keyNodes, &pg_query.Node{Node: &pg_query.Node_ColumnRef{ColumnRef: ref}})
	}
	return nil
}

func (p *planner) keyIndex(name string) int {
	for i, k := range p.keys {
		if k.Column == name {
			return i
		}
	}
	return -1
}

func (p *planner) targets(sel *pg_query.SelectStmt, plan *Plan) error {
	for _, t := range sel.TargetList {
		rt := t.GetResTarget()
		switch v := rt.GetVal().GetNode().(type) {
		case *pg_query.Node_ColumnRef:
			name, err := p.column(v.ColumnRef)
			if err != nil {
				return err
			}
			k := p.keyIndex(name)
			if k < 0 {
				return reject(CodeForbidden, v.ColumnRef.Location, "column %s must appear in GROUP BY or be used in an aggregate: returning it would reveal individual rows of private table %s", name, p.table.QualifiedName())
			}
			plan.Outputs = append(plan.Outputs, Output{GroupKey: k})
		case *pg_query.Node_FuncCall:
			agg, arg, err := p.aggregate(v.FuncCall)
			if err != nil {
				return err
			}
			plan.Aggregates = append(plan.Aggregates, agg)
			p.aggArgs = append(p.aggArgs, arg)
			plan.Outputs = append(plan.Outputs, Output{GroupKey: -1, Agg: agg})
		default:
			return reject(CodeUnsupported, rt.GetLocation(), "output %s is not supported on private table %s: outputs must be group-key columns or the aggregates count, sum and avg", describe(rt.GetVal()), p.table.QualifiedName())
		}
	}
	return nil
}

// aggregate checks one aggregate call; arg is its column (nil for count(*)).
func (p *planner) aggregate(fc *pg_query.FuncCall) (*Aggregate, *pg_query.Node, error) {
	schema, name := funcName(fc)
	tname := p.table.QualifiedName()
	if schema != "" && schema != "pg_catalog" {
		return nil, nil, reject(CodeForbidden, fc.Location, "function %s.%s is not allowed on private table %s", schema, name, tname)
	}
	switch name {
	case "count", "sum", "avg":
	default:
		if knownAggregates[name] {
			return nil, nil, reject(CodeUnsupported, fc.Location, "aggregate %s is not supported yet on private tables; use count, sum or avg", name)
		}
		return nil, nil, reject(CodeForbidden, fc.Location, "function %s is not allowed on private table %s", name, tname)
	}
	switch {
	case fc.Over != nil:
		return nil, nil, reject(CodeUnsupported, fc.Location, "window function %s(...) OVER is not supported on private tables", name)
	case fc.AggFilter != nil:
		return nil, nil, reject(CodeUnsupported, fc.Location, "FILTER on aggregate %s is not supported yet; use WHERE", name)
	case len(fc.AggOrder) > 0 || fc.AggWithinGroup:
		return nil, nil, reject(CodeUnsupported, fc.Location, "ORDER BY inside aggregate %s is not supported", name)
	case fc.FuncVariadic:
		return nil, nil, reject(CodeUnsupported, fc.Location, "VARIADIC in aggregate %s is not supported", name)
	}
	agg := &Aggregate{Func: name, SumCol: -1, CountCol: -1}
	if fc.AggStar {
		if name != "count" {
			return nil, nil, reject(CodeSyntax, fc.Location, "%s(*) is not an aggregate", name)
		}
		agg.Kind = AggCount
		return agg, nil, nil
	}
	if len(fc.Args) != 1 {
		return nil, nil, reject(CodeUnsupported, fc.Location, "aggregate %s takes exactly one column here", name)
	}
	ref := fc.Args[0].GetColumnRef()
	if ref == nil {
		return nil, nil, reject(CodeUnsupported, fc.Location, "the argument of %s must be a plain column of the table (for now), not %s", name, describe(fc.Args[0]))
	}
	col, err := p.column(ref)
	if err != nil {
		return nil, nil, err
	}
	agg.Column = col
	unit := p.table.PrivacyUnit
	switch name {
	case "count":
		agg.Kind = AggCount
		if fc.AggDistinct {
			if col != unit {
				return nil, nil, reject(CodeUnsupported, fc.Location, "count(DISTINCT %s) is not supported yet: only count(DISTINCT %s), the privacy unit, is", col, unit)
			}
			agg.Kind = AggCountDistinctUnit
		}
	case "sum", "avg":
		if fc.AggDistinct {
			return nil, nil, reject(CodeUnsupported, fc.Location, "DISTINCT inside %s is not supported", name)
		}
		if col == unit {
			return nil, nil, reject(CodeForbidden, ref.Location, "%s(%s) is refused: %s is the privacy unit", name, col, col)
		}
		c := p.table.Columns[col]
		if !c.HasBounds() {
			return nil, nil, reject(CodeForbidden, ref.Location, "%s(%s) needs clamping bounds for column %s", name, col, col).
				withHint("Add lower and upper under tables.%s.columns.%s in the configuration.", tname, col)
		}
		agg.Lower, agg.Upper = *c.Lower, *c.Upper
		agg.Kind = AggSum
		if name == "avg" {
			agg.Kind = AggAvg
		}
	}
	return agg, fc.Args[0], nil
}

// Operators allowed in WHERE on a private table.
var (
	comparisonOps = map[string]bool{"=": true, "<>": true, "!=": true, "<": true, ">": true, "<=": true, ">=": true}
	likeOps       = map[string]bool{"~~": true, "!~~": true, "~~*": true, "!~~*": true}
	arithmeticOps = map[string]bool{"+": true, "-": true, "*": true, "/": true, "%": true, "^": true}
	regexOps      = map[string]bool{"~": true, "~*": true, "!~": true, "!~*": true}
)

// deps says what an expression depends on besides constants.
type deps uint8

const (
	depColumn deps = 1 << iota // a column of the private table
	depParam                   // a client parameter ($n)
)

// where checks a WHERE expression and reports what it depends on. Only
// predicates that cannot fail depending on the rows' values are allowed:
// an expression over constants alone is folded (and fails, if it fails)
// when the upstream plans the query, before any row is read.
func (p *planner) where(n *pg_query.Node) (deps, error) {
	tname := p.table.QualifiedName()
	switch x := n.GetNode().(type) {
	case *pg_query.Node_BoolExpr:
		return p.whereAll(x.BoolExpr.Args)
	case *pg_query.Node_AExpr:
		return p.aExpr(x.AExpr)
	case *pg_query.Node_NullTest:
		return p.where(x.NullTest.Arg)
	case *pg_query.Node_BooleanTest:
		return p.where(x.BooleanTest.Arg)
	case *pg_query.Node_ColumnRef:
		_, err := p.column(x.ColumnRef)
		return depColumn, err
	case *pg_query.Node_AConst:
		return 0, nil
	case *pg_query.Node_ParamRef:
		return depParam, nil
	case *pg_query.Node_TypeCast:
		d, err := p.where(x.TypeCast.Arg)
		if err != nil {
			return 0, err
		}
		if d&depColumn != 0 {
			return 0, reject(CodeForbidden, x.TypeCast.Location, "a cast of a column is refused in WHERE on private table %s: it can fail depending on private values", tname)
		}
		return d, nil
	case *pg_query.Node_SubLink:
		return 0, reject(CodeUnsupported, x.SubLink.Location, "subqueries are not supported in queries over private table %s", tname)
	case *pg_query.Node_FuncCall:
		_, name := funcName(x.FuncCall)
		return 0, reject(CodeForbidden, x.FuncCall.Location, "function %s is not allowed in WHERE on private table %s", name, tname)
	}
	return 0, reject(CodeUnsupported, -1, "%s is not supported in WHERE on private table %s", describe(n), tname)
}

func (p *planner) whereAll(ns []*pg_query.Node) (deps, error) {
	var d deps
	for _, n := range ns {
		if n == nil {
			continue
		}
		nd, err := p.where(n)
		if err != nil {
			return 0, err
		}
		d |= nd
	}
	return d, nil
}

func (p *planner) aExpr(e *pg_query.A_Expr) (deps, error) {
	tname := p.table.QualifiedName()
	if len(e.Name) != 1 || e.Name[0].GetString_() == nil {
		return 0, reject(CodeUnsupported, e.Location, "qualified operators (OPERATOR(...)) are not supported on private table %s", tname)
	}
	op := e.Name[0].GetString_().GetSval()
	// list is the right side of IN and BETWEEN.
	list := func(n *pg_query.Node) []*pg_query.Node {
		if items := n.GetList().GetItems(); items != nil {
			return items
		}
		return []*pg_query.Node{n}
	}
	switch e.Kind {
	case pg_query.A_Expr_Kind_AEXPR_OP:
		switch {
		case arithmeticOps[op]:
			d, err := p.whereAll([]*pg_query.Node{e.Lexpr, e.Rexpr})
			if err != nil {
				return 0, err
			}
			if d != 0 {
				return 0, reject(CodeForbidden, e.Location, "arithmetic (%s) on a column or parameter is refused in WHERE on private table %s: overflow or division errors would depend on private values", op, tname)
			}
			return 0, nil
		case e.Lexpr == nil || e.Rexpr == nil:
		case comparisonOps[op]:
			return p.whereAll([]*pg_query.Node{e.Lexpr, e.Rexpr})
		case likeOps[op]:
			return p.like(e)
		case regexOps[op]:
			return 0, reject(CodeForbidden, e.Location, "regular expression operator %s is not allowed on private table %s", op, tname)
		}
		return 0, reject(CodeForbidden, e.Location, "operator %s is not allowed in WHERE on private table %s", op, tname)
	case pg_query.A_Expr_Kind_AEXPR_LIKE, pg_query.A_Expr_Kind_AEXPR_ILIKE:
		return p.like(e)
	case pg_query.A_Expr_Kind_AEXPR_SIMILAR:
		return 0, reject(CodeForbidden, e.Location, "SIMILAR TO is not allowed on private table %s", tname)
	case pg_query.A_Expr_Kind_AEXPR_IN,
		pg_query.A_Expr_Kind_AEXPR_BETWEEN, pg_query.A_Expr_Kind_AEXPR_NOT_BETWEEN,
		pg_query.A_Expr_Kind_AEXPR_BETWEEN_SYM, pg_query.A_Expr_Kind_AEXPR_NOT_BETWEEN_SYM:
		return p.whereAll(append([]*pg_query.Node{e.Lexpr}, list(e.Rexpr)...))
	}
	return 0, reject(CodeUnsupported, e.Location, "%s is not supported in WHERE on private table %s", aExprKindName(e.Kind), tname)
}

// like checks x LIKE pattern. PostgreSQL reports a malformed pattern (one
// ending in the escape character) only when matching reaches that point,
// so whether it fails depends on the rows: the pattern must be a constant
// string, checked here.
func (p *planner) like(e *pg_query.A_Expr) (deps, error) {
	tname := p.table.QualifiedName()
	d, err := p.where(e.Lexpr)
	if err != nil {
		return 0, err
	}
	pat := e.Rexpr
	if tc := pat.GetTypeCast(); tc != nil {
		pat = tc.Arg
	}
	c := pat.GetAConst()
	if c == nil || c.GetSval() == nil {
		return 0, reject(CodeForbidden, e.Location, "a LIKE pattern must be a constant string on private table %s: an invalid pattern would fail depending on private values", tname)
	}
	if !validLikePattern(c.GetSval().GetSval()) {
		return 0, reject(CodeForbidden, c.Location, "LIKE pattern must not end with escape character")
	}
	if _, err := p.where(e.Rexpr); err != nil {
		return 0, err
	}
	return d, nil
}

// validLikePattern reports whether every backslash escapes a character.
func validLikePattern(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			if i+1 >= len(s) {
				return false
			}
			i++
		}
	}
	return true
}

func aExprKindName(k pg_query.A_Expr_Kind) string {
	switch k {
	case pg_query.A_Expr_Kind_AEXPR_OP_ANY:
		return "op ANY (...)"
	case pg_query.A_Expr_Kind_AEXPR_OP_ALL:
		return "op ALL (...)"
	case pg_query.A_Expr_Kind_AEXPR_DISTINCT, pg_query.A_Expr_Kind_AEXPR_NOT_DISTINCT:
		return "IS [NOT] DISTINCT FROM"
	case pg_query.A_Expr_Kind_AEXPR_NULLIF:
		return "NULLIF"
	}
	return k.String()
}

// outputName is the column name PostgreSQL gives an output (FigureColname,
// for the outputs allowed here).
func outputName(rt *pg_query.ResTarget) string {
	if rt.Name != "" {
		return rt.Name
	}
	switch v := rt.GetVal().GetNode().(type) {
	case *pg_query.Node_ColumnRef:
		f := v.ColumnRef.Fields
		return f[len(f)-1].GetString_().GetSval()
	case *pg_query.Node_FuncCall:
		_, name := funcName(v.FuncCall)
		return name
	}
	return "?column?"
}

func (p *planner) orderBy(sel *pg_query.SelectStmt, plan *Plan) error {
	for _, s := range sel.SortClause {
		sb := s.GetSortBy()
		if sb == nil || sb.SortbyDir == pg_query.SortByDir_SORTBY_USING {
			return reject(CodeUnsupported, -1, "ORDER BY ... USING is not supported on private tables")
		}
		out, err := p.orderOutput(sel, plan, sb.Node)
		if err != nil {
			return err
		}
		k := OrderKey{Output: out, Descending: sb.SortbyDir == pg_query.SortByDir_SORTBY_DESC}
		switch sb.SortbyNulls {
		case pg_query.SortByNulls_SORTBY_NULLS_FIRST:
			k.NullsFirst = true
		case pg_query.SortByNulls_SORTBY_NULLS_LAST:
		default:
			k.NullsFirst = k.Descending
		}
		plan.OrderBy = append(plan.OrderBy, k)
	}
	return nil
}

// orderOutput finds the output an ORDER BY item sorts by, as PostgreSQL
// does: a position, then an output name, then an expression equal to an
// output.
func (p *planner) orderOutput(sel *pg_query.SelectStmt, plan *Plan, n *pg_query.Node) (int, error) {
	switch x := n.GetNode().(type) {
	case *pg_query.Node_AConst:
		pos, ok := intConst(x.AConst)
		if !ok {
			return 0, reject(CodeUnsupported, x.AConst.Location, "ORDER BY accepts output positions, output names or outputs")
		}
		if pos < 1 || pos > int64(len(plan.Outputs)) {
			return 0, reject(CodeBadPosition, x.AConst.Location, "ORDER BY position %d is not in select list", pos)
		}
		return int(pos - 1), nil
	case *pg_query.Node_ColumnRef:
		if f := x.ColumnRef.Fields; len(f) == 1 && f[0].GetString_() != nil {
			name := f[0].GetString_().GetSval()
			found := -1
			for i, t := range sel.TargetList {
				if outputName(t.GetResTarget()) == name {
					if found >= 0 {
						return 0, reject(CodeAmbiguous, x.ColumnRef.Location, "ORDER BY %q is ambiguous", name)
					}
					found = i
				}
			}
			if found >= 0 {
				return found, nil
			}
		}
		name, err := p.column(x.ColumnRef)
		if err != nil {
			return 0, err
		}
		for i, o := range plan.Outputs {
			if o.Agg == nil && p.keys[o.GroupKey].Column == name {
				return i, nil
			}
		}
		return 0, reject(CodeUnsupported, x.ColumnRef.Location, "ORDER BY %s must refer to an output of the query", name)
	case *pg_query.Node_FuncCall:
		agg, _, err := p.aggregate(x.FuncCall)
		if err != nil {
			return 0, err
		}
		for i, o := range plan.Outputs {
			if o.Agg != nil && o.Agg.Func == agg.Func && o.Agg.Kind == agg.Kind && o.Agg.Column == agg.Column {
				return i, nil
			}
		}
		return 0, reject(CodeUnsupported, x.FuncCall.Location, "ORDER BY %s must refer to an output of the query", describe(n))
	}
	return 0, reject(CodeUnsupported, -1, "ORDER BY %s is not supported on private tables: order by an output", describe(n))
}

// intConst returns the value of an integer constant.
func intConst(c *pg_query.A_Const) (int64, bool) {
	switch v := c.Val.(type) {
	case *pg_query.A_Const_Ival:
		return int64(v.Ival.Ival), true
	case *pg_query.A_Const_Fval:
		// integers beyond int32 arrive as Float
		i, err := strconv.ParseInt(v.Fval.Fval, 10, 64)
		return i, err == nil
	}
	return 0, false
}

func limitValue(n *pg_query.Node, what, code string, absent int64) (int64, error) {
	if n == nil {
		return absent, nil
	}
	c := n.GetAConst()
	if c != nil && c.Isnull {
		return absent, nil
	}
	if c == nil {
		return 0, reject(CodeUnsupported, -1, "%s must be an integer constant on private tables", what)
	}
	v, ok := intConst(c)
	if !ok {
		return 0, reject(CodeUnsupported, c.Location, "%s must be an integer constant on private tables", what)
	}
	if v < 0 {
		return 0, reject(code, c.Location, "%s must not be negative", what)
	}
	return v, nil
}

// numParams is the highest $n in the statement.
func numParams(sel *pg_query.SelectStmt) int {
	max := 0
	walk(sel.ProtoReflect(), func(m protoreflect.Message) bool {
		if pr, ok := m.Interface().(*pg_query.ParamRef); ok && int(pr.Number) > max {
			max = int(pr.Number)
		}
		return true
	})
	return max
}

// describe prints a node for a message: its SQL when it deparses, else its
// type.
func describe(n *pg_query.Node) string {
	if s, err := deparseExpr(n); err == nil && len(s) <= 80 {
		return s
	}
	if n == nil || n.Node == nil {
		return "an empty expression"
	}
	m := n.ProtoReflect()
	if fd := m.WhichOneof(m.Descriptor().Oneofs().Get(0)); fd != nil {
		return string(fd.Message().Name())
	}
	return "an expression"
}

// sql writes the rewritten query (docs/design.md, "The rewrite template")
// and fills in the result column indexes of the plan.
func (p *planner) sql(sel *pg_query.SelectStmt, plan *Plan) (string, error) {
	unit, err := quoteIdent(p.table.PrivacyUnit)
	if err != nil {
		return "", err
	}
	from, err := fromItem(p.rv, p.table.Schema)
	if err != nil {
		return "", err
	}
	r := intLit(p.table.MaxRowsPerUnit)
	salt := "$" + strconv.Itoa(plan.NumParams+1) + "::text"

	keyCols := make([]string, len(p.keys))
	var inner, innerGroup []string
	inner = append(inner, unit+" AS dp_u")
	innerGroup = append(innerGroup, unit)
	var where []string
	if sel.WhereClause != nil {
		w, err := parenExpr(sel.WhereClause)
		if err != nil {
			return "", err
		}
		where = append(where, w)
	}
	for i := range p.keys {
		e, err := parenExpr(p.keyNodes[i])
		if err != nil {
			return "", err
		}
		keyCols[i] = "g" + strconv.Itoa(i)
		inner = append(inner, e+" AS "+keyCols[i])
		innerGroup = append(innerGroup, e)
		p.keys[i].ResultCol = i
		if pv := p.keys[i].PublicValues; pv != nil {
			lits := make([]string, len(pv))
			for j, v := range pv {
				lits[j] = quoteLiteral(v)
			}
			where = append(where, e+"::text IN ("+strings.Join(lits, ", ")+")")
		}
	}
	inner = append(inner, "count(*) AS dp_n")
	plan.UnitsCol = len(p.keys)
	perUnit := []string{} // per-unit components carried to the outer query
	var outer []string
	outer = append(outer, keyCols...)
	outer = append(outer, "count(*) AS dp_units")
	next := len(p.keys) + 1
	comp := func(expr string) int {
		col := next
		outer = append(outer, fmt.Sprintf("%s AS a%d", expr, col-len(p.keys)-1))
		next++
		return col
	}
	scaled := func(c string) string { return "sum(" + c + " * least(1, " + r + "::numeric / dp_n))" }
	for i, agg := range plan.Aggregates {
		var col string
		if arg := p.aggArgs[i]; arg != nil {
			if col, err = deparseExpr(arg); err != nil {
				return "", err
			}
		}
		s, c := "s"+strconv.Itoa(i), "c"+strconv.Itoa(i)
		clamp := fmt.Sprintf("sum(least(greatest((%s)::numeric, %s), %s)) AS %s", col, numLit(agg.Lower), numLit(agg.Upper), s)
		switch agg.Kind {
		case AggCount:
			if arg := p.aggArgs[i]; arg == nil {
				agg.CountCol = comp("sum(least(dp_n, " + r + "))")
			} else {
				inner = append(inner, "count("+col+") AS "+c)
				perUnit = append(perUnit, c)
				agg.CountCol = comp(scaled(c))
			}
		case AggCountDistinctUnit:
			agg.CountCol = comp("count(dp_u)")
		case AggSum:
			inner = append(inner, clamp)
			perUnit = append(perUnit, s)
			agg.SumCol = comp(scaled(s))
		case AggAvg:
			inner = append(inner, clamp, "count("+col+") AS "+c)
			perUnit = append(perUnit, s, c)
			agg.SumCol = comp(scaled(s))
			agg.CountCol = comp(scaled(c))
		}
	}

	var b strings.Builder
	indent := "  "
	if len(p.keys) > 0 {
		indent = "    "
	}
	innerSQL := indent + "SELECT " + strings.Join(inner, ", ") + "\n" + indent + "FROM " + from + "\n"
	if len(where) > 0 {
		innerSQL += indent + "WHERE " + strings.Join(where, " AND ") + "\n"
	}
	innerSQL += indent + "GROUP BY " + strings.Join(innerGroup, ", ") + "\n"

	b.WriteString("SELECT " + strings.Join(outer, ", ") + "\nFROM (\n")
	if len(p.keys) == 0 {
		b.WriteString(innerSQL)
		b.WriteString(") AS dp_per_unit\n")
		// Without GROUP BY each unit touches one group, so no group is
		// sampled; the salt is still referenced so that every plan takes
		// exactly NumParams+1 parameters.
		b.WriteString("WHERE " + salt + " IS NOT NULL")
		return b.String(), nil
	}
	mid := append([]string{"dp_u"}, keyCols...)
	mid = append(mid, "dp_n")
	mid = append(mid, perUnit...)
	hash := "md5(concat_ws('|', " + salt + ", dp_u, " + strings.Join(keyCols, ", ") + "))"
	mid = append(mid, "row_number() OVER (PARTITION BY dp_u ORDER BY "+hash+") AS dp_rank")
	b.WriteString("  SELECT " + strings.Join(mid, ", ") + "\n  FROM (\n")
	b.WriteString(innerSQL)
	b.WriteString("  ) AS dp_per_unit\n) AS dp_ranked\n")
	b.WriteString("WHERE dp_rank <= " + intLit(p.table.MaxGroupsPerUnit) + "\n")
	b.WriteString("GROUP BY " + strings.Join(keyCols, ", "))
	return b.String(), nil
}
