package rewrite

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dpproxy/dpproxy/conf"
)

// systemColumns identify individual rows (or reveal physical layout).
var systemColumns = map[string]bool{
	"ctid": true, "xmin": true, "xmax": true, "cmin": true, "cmax": true, "tableoid": true, "oid": true,
}

// knownAggregates are aggregates of PostgreSQL that are not supported on
// private tables: they get a 0A000 rather than a 42501.
var knownAggregates = map[string]bool{
	"min": true, "max": true, "mode": true,
	"array_agg": true, "string_agg": true, "bool_and": true, "bool_or": true, "every": true,
	"bit_and": true, "bit_or": true, "json_agg": true, "jsonb_agg": true, "corr": true, "covar_pop": true,
	"covar_samp": true, "regr_count": true, "median": true, "json_object_agg": true, "xmlagg": true,
}

// dpAggregates are the aggregates the rewrite bounds.
var dpAggregates = map[string]bool{
	"count": true, "sum": true, "avg": true,
	"variance": true, "var_samp": true, "var_pop": true, "stddev": true, "stddev_samp": true, "stddev_pop": true,
	"percentile_cont": true, "percentile_disc": true,
}

// quantileBuckets is the number of equal buckets of [lower, upper] a
// quantile's histogram has: the released quantile is drawn uniformly
// within the chosen bucket, so its error from bucketing alone is at most
// (upper-lower)/64.
const quantileBuckets = 64

// colRef is a resolved column reference.
type colRef struct {
	name    string
	private bool // a column of the private table (else of a public table)
}

// planner holds what is known while one private query is checked.
type planner struct {
	a     *Analyzer
	table *conf.Table
	rv    *pg_query.RangeVar
	// refName is how columns of the private table may be qualified: the
	// alias, or the table name.
	refName string
	// pubs are the names (alias or table name, and schema.table when not
	// aliased) of the public tables joined to the private table.
	pubs map[string]bool
	// joined is set when the FROM clause holds more than the private table.
	joined bool
	// rels resolves the RangeVars of the (flattened) statement.
	rels map[*pg_query.RangeVar]*relRef
	// quals are the join conditions, checked like WHERE.
	quals []*pg_query.Node
	// keys are the GROUP BY keys; keyNodes the expressions as written,
	// keySQL the expressions to print in the rewrite (columns in
	// arithmetic cast to numeric).
	keys     []GroupKey
	keyNodes []*pg_query.Node
	keySQL   []*pg_query.Node
	keyCols  []*colRef // plain-column keys, nil for expressions
	// aggs are the distinct aggregates (by text); aggArgs their argument
	// as printed (nil for count(*)); aggFilters their FILTER (nil if none).
	aggs       []*Aggregate
	aggArgs    []*pg_query.Node
	aggFilters []*pg_query.Node
	// tot collects the hoisted constants and type checks (hoist.go).
	tot totality
}

// plan checks that sel is the supported shape of a query over one private
// table (joined with public tables, possibly through derived tables and
// CTEs, which are inlined) and rewrites it.
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
	if sel.Op != pg_query.SetOperation_SETOP_NONE {
		return nil, reject(CodeUnsupported, priv.rv.Location, "set operations (UNION, INTERSECT, EXCEPT) over private table %s are not supported: each branch would need its own budget", name)
	}
	orig := sel
	flat, err := a.flatten(sel)
	if err != nil {
		return nil, err
	}
	sel = flat
	frefs := collectRels(sel.ProtoReflect())
	if err := a.resolve(frefs); err != nil {
		return nil, err
	}
	p := &planner{a: a, pubs: map[string]bool{}, rels: map[*pg_query.RangeVar]*relRef{}}
	p.tot.nparams = numParams(orig)
	for _, r := range frefs {
		p.rels[r.rv] = r
	}
	if err := p.fromClause(sel.FromClause); err != nil {
		return nil, err
	}
	if p.rv == nil {
		return nil, reject(CodeUnsupported, priv.rv.Location, "private table %s may only be read in the FROM clause of the query, possibly through derived tables or CTEs", name)
	}
	inFrom := map[*pg_query.RangeVar]bool{}
	for _, f := range sel.FromClause {
		walk(f.ProtoReflect(), func(m protoreflect.Message) bool {
			if rv, ok := m.Interface().(*pg_query.RangeVar); ok {
				inFrom[rv] = true
			}
			return true
		})
	}
	for _, r := range frefs {
		if inFrom[r.rv] {
			continue
		}
		if r.class == relPrivate {
			return nil, reject(CodeUnsupported, r.rv.Location, "private table %s may only be read in the FROM clause of the query: subqueries in expressions are not supported", r.qualified())
		}
		return nil, reject(CodeUnsupported, r.rv.Location, "relation %s cannot be read in a subquery of a query over private table %s: join it in the FROM clause", r.qualified(), name)
	}
	if err := p.boundedWork(sel); err != nil { // work.go, joins.go
		return nil, err
	}
	switch {
	case len(sel.DistinctClause) > 0:
		return nil, reject(CodeUnsupported, -1, "SELECT DISTINCT over private table %s is not supported; use GROUP BY", name)
	case len(sel.WindowClause) > 0:
		return nil, reject(CodeUnsupported, -1, "WINDOW clauses are not supported on private table %s", name)
	case sel.LimitOption == pg_query.LimitOption_LIMIT_OPTION_WITH_TIES:
		return nil, reject(CodeUnsupported, -1, "FETCH ... WITH TIES is not supported on private table %s", name)
	case len(sel.TargetList) == 0:
		return nil, reject(CodeUnsupported, -1, "a query over private table %s must select group keys or aggregates", name)
	}
	if err := p.noSystemColumns(sel); err != nil {
		return nil, err
	}
	plan := &Plan{Table: p.table, MaxRows: p.table.MaxRowsPerUnit, Limit: -1}
	if err := p.groupBy(sel); err != nil {
		return nil, err
	}
	for _, q := range p.quals {
		out, _, err := p.where(q)
		if err != nil {
			return nil, err
		}
		p.tot.replaceLater(q, out)
	}
	if sel.WhereClause != nil {
		out, _, err := p.where(sel.WhereClause)
		if err != nil {
			return nil, err
		}
		p.tot.replaceLater(sel.WhereClause, out)
	}
	if len(sel.GroupClause) == 0 && !hasAggregate(sel.TargetList) {
		var werr error
		walk(sel.ProtoReflect(), func(m protoreflect.Message) bool {
			if fc, ok := m.Interface().(*pg_query.FuncCall); ok && fc.Over != nil && werr == nil {
				_, name := funcName(fc)
				werr = reject(CodeUnsupported, fc.Location, "window function %s(...) OVER is not supported on private tables", name)
			}
			return werr == nil
		})
		if werr != nil {
			return nil, werr
		}
		for _, t := range sel.TargetList {
			if cr := t.GetResTarget().GetVal().GetColumnRef(); cr != nil {
				if _, err := p.column(cr); err != nil {
					return nil, err
				}
			}
		}
		return nil, reject(CodeForbidden, -1, "a query over private table %s without aggregates or GROUP BY would return one row per table row", name).
			withHint("Select aggregates such as count(*), sum(col), avg(col).")
	}
	simple := sel.HavingClause == nil && p.simpleTargets(sel)
	if simple {
		if err := p.targets(sel, plan); err != nil {
			return nil, err
		}
		if err := p.orderBy(sel, plan); err != nil {
			var re *RejectError
			if !asReject(err, &re) || re.Code == CodeForbidden || re.Code == CodeBadColumnRef {
				return nil, err
			}
			simple = false
			plan.Outputs, plan.OrderBy = nil, nil
		}
	}
	if plan.Limit, err = limitValue(sel.LimitCount, "LIMIT", CodeBadLimit, -1); err != nil {
		return nil, err
	}
	if plan.Offset, err = limitValue(sel.LimitOffset, "OFFSET", CodeBadOffset, 0); err != nil {
		return nil, err
	}
	if simple {
		on := &pg_query.Node{Node: &pg_query.Node_SelectStmt{SelectStmt: orig}}
		if plan.DescribeSQL, err = deparseStmt(on); err != nil {
			return nil, err
		}
		if err := faithful(on, plan.DescribeSQL); err != nil {
			return nil, err
		}
	} else {
		if err := p.post(orig, sel, plan); err != nil {
			return nil, err
		}
		on := &pg_query.Node{Node: &pg_query.Node_SelectStmt{SelectStmt: orig}}
		if plan.OriginalSQL, err = deparseStmt(on); err != nil {
			return nil, err
		}
		if err := faithful(on, plan.OriginalSQL); err != nil {
			return nil, err
		}
	}
	plan.Aggregates = p.aggs
	plan.NumParams = numParams(orig)
	p.bounds(plan)
	p.tot.apply() // the checked WHERE and join conditions, constants hoisted
	if err := p.tot.finish(plan); err != nil {
		return nil, err
	}
	if plan.SQL, err = p.sql(sel, plan); err != nil {
		return nil, err
	}
	plan.GroupKeys = p.keys
	return plan, nil
}

func asReject(err error, re **RejectError) bool {
	r, ok := err.(*RejectError)
	*re = r
	return ok
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

// fromClause checks the FROM items: the private table, joined (inner, left
// or right, never on the nullable side) with public tables only.
func (p *planner) fromClause(items []*pg_query.Node) error {
	if len(items) > 1 {
		p.joined = true
	}
	for _, it := range items {
		if err := p.fromItem(it, false); err != nil {
			return err
		}
	}
	return nil
}

func (p *planner) fromItem(n *pg_query.Node, nullable bool) error {
	switch x := n.GetNode().(type) {
	case *pg_query.Node_RangeVar:
		rv := x.RangeVar
		r := p.rels[rv]
		if r == nil {
			return reject(CodeUnsupported, rv.Location, "relation %s cannot be resolved", rv.Relname)
		}
		switch r.class {
		case relPrivate:
			if p.rv != nil {
				return reject(CodeUnsupported, rv.Location, "joins of two private tables (%s, %s) are not supported: each person's rows in both would have to be bounded together", p.table.QualifiedName(), r.qualified()).
					withHint("Aggregate each private table in its own query.")
			}
			if nullable {
				return reject(CodeUnsupported, rv.Location, "private table %s is on the nullable side of an outer join: rows without a private match would belong to no person; use an inner join or put %s on the preserved side", r.qualified(), r.qualified())
			}
			if rv.Alias != nil && len(rv.Alias.Colnames) > 0 {
				return reject(CodeUnsupported, rv.Location, "column aliases on private table %s are not supported", r.qualified())
			}
			p.table, p.rv, p.refName = r.table, rv, rv.Relname
			if rv.Alias != nil {
				p.refName = rv.Alias.Aliasname
			}
		case relPublic:
			if rv.Alias != nil && len(rv.Alias.Colnames) > 0 {
				return reject(CodeUnsupported, rv.Location, "column aliases on joined table %s are not supported", r.qualified())
			}
			if rv.Alias != nil {
				p.pubs[rv.Alias.Aliasname] = true
			} else {
				p.pubs[rv.Relname] = true
				p.pubs[r.schema+"."+rv.Relname] = true
			}
		default:
			return reject(CodeUnsupported, rv.Location, "%s cannot be joined with a private table: only tables configured as public can", r.qualified())
		}
		return nil
	case *pg_query.Node_JoinExpr:
		j := x.JoinExpr
		p.joined = true
		if j.IsNatural {
			return reject(CodeUnsupported, -1, "NATURAL joins with a private table are not supported: name the join columns with ON or USING")
		}
		if j.Alias != nil || j.JoinUsingAlias != nil {
			return reject(CodeUnsupported, -1, "aliases on a join with a private table are not supported")
		}
		ln, rn := nullable, nullable
		switch j.Jointype {
		case pg_query.JoinType_JOIN_INNER:
		case pg_query.JoinType_JOIN_LEFT:
			rn = true
		case pg_query.JoinType_JOIN_RIGHT:
			ln = true
		default:
			return reject(CodeUnsupported, -1, "only inner, left and right joins are supported with a private table")
		}
		if j.Quals != nil {
			p.quals = append(p.quals, j.Quals)
		}
		if err := p.fromItem(j.Larg, ln); err != nil {
			return err
		}
		return p.fromItem(j.Rarg, rn)
	case *pg_query.Node_RangeSubselect:
		return reject(CodeUnsupported, -1, "a subquery over public tables cannot be joined with a private table: join the table directly")
	case *pg_query.Node_RangeFunction:
		return reject(CodeUnsupported, -1, "functions in FROM are not supported in a query over private table")
	}
	return reject(CodeUnsupported, -1, "%s is not supported in FROM with a private table", describe(n))
}

// column resolves a column reference to a column of the private table or
// of a joined public table, refusing *, whole-row references and
// references to other relations. Without joins every column is the private
// table's. With joins an unqualified name is the private table's when it
// is its privacy unit or a configured column (PostgreSQL reports it as
// ambiguous if a public table has it too), else it is taken as a public
// table's: nothing is derived from such a column but its values.
func (p *planner) column(c *pg_query.ColumnRef) (*colRef, error) {
	n := len(c.Fields)
	if n == 0 {
		return nil, reject(CodeUnsupported, c.Location, "empty column reference")
	}
	if c.Fields[n-1].GetAStar() != nil {
		return nil, reject(CodeForbidden, c.Location, "SELECT * would return individual rows of private table %s", p.table.QualifiedName()).
			withHint("Select group keys and aggregates such as count(*), sum(col), avg(col).")
	}
	quals := make([]string, 0, n-1)
	for _, f := range c.Fields[:n-1] {
		quals = append(quals, f.GetString_().GetSval())
	}
	name := c.Fields[n-1].GetString_().GetSval()
	bad := func() error {
		return reject(CodeBadColumnRef, c.Location, "column reference %s does not refer to table %s", strings.Join(append(quals, name), "."), p.refName)
	}
	if name == "" {
		return nil, bad()
	}
	switch len(quals) {
	case 0:
		if name == p.refName || p.pubs[name] {
			return nil, reject(CodeForbidden, c.Location, "whole-row reference %s would return individual rows of private table %s", name, p.table.QualifiedName())
		}
		if !p.joined || name == p.table.PrivacyUnit || p.table.Columns[name] != nil {
			return &colRef{name: name, private: true}, nil
		}
		return &colRef{name: name}, nil
	case 1:
		switch {
		case quals[0] == p.refName:
			return &colRef{name: name, private: true}, nil
		case p.pubs[quals[0]]:
			return &colRef{name: name}, nil
		}
	case 2:
		q := quals[0] + "." + quals[1]
		switch {
		case p.rv.Alias == nil && quals[0] == p.table.Schema && quals[1] == p.table.Name:
			return &colRef{name: name, private: true}, nil
		case p.pubs[q]:
			return &colRef{name: name}, nil
		}
	}
	return nil, bad()
}

func (p *planner) groupBy(sel *pg_query.SelectStmt) error {
	for _, g := range sel.GroupClause {
		node := g
		switch x := g.Node.(type) {
		case *pg_query.Node_AConst:
			pos, ok := intConst(x.AConst)
			if !ok {
				return reject(CodeUnsupported, x.AConst.Location, "GROUP BY accepts expressions or output positions only")
			}
			if pos < 1 || pos > int64(len(sel.TargetList)) {
				return reject(CodeBadPosition, x.AConst.Location, "GROUP BY position %d is not in select list", pos)
			}
			node = sel.TargetList[pos-1].GetResTarget().GetVal()
			if fc := node.GetFuncCall(); fc != nil && isAggregate(fc) {
				return reject(CodeUnsupported, x.AConst.Location, "GROUP BY %d refers to an aggregate", pos)
			}
		case *pg_query.Node_GroupingSet:
			return reject(CodeUnsupported, x.GroupingSet.Location, "GROUPING SETS, ROLLUP and CUBE are not supported on private tables")
		}
		if p.keyFor(node) >= 0 {
			continue
		}
		k := GroupKey{}
		var cr *colRef
		if ref := node.GetColumnRef(); ref != nil {
			c, err := p.column(ref)
			if err != nil {
				return err
			}
			if c.private && c.name == p.table.PrivacyUnit {
				return reject(CodeForbidden, ref.Location, "GROUP BY %s is refused: grouping by the privacy unit would release per-person values", c.name)
			}
			cr = c
			k.Column = c.name
			if col := p.table.Columns[c.name]; c.private && col != nil && col.PublicValues != nil {
				k.PublicValues = col.PublicValues
			}
		}
		out, _, err := p.value(node, true)
		if err != nil {
			return err
		}
		if p.mentionsUnit(node) && cr == nil {
			return reject(CodeForbidden, -1, "GROUP BY %s is refused: an expression of the privacy unit %s could release per-person values", describe(node), p.table.PrivacyUnit)
		}
		p.keys = append(p.keys, k)
		p.keyNodes = append(p.keyNodes, node)
		p.keySQL = append(p.keySQL, out)
		p.keyCols = append(p.keyCols, cr)
	}
	return nil
}

// mentionsUnit reports whether n reads the privacy unit column.
func (p *planner) mentionsUnit(n *pg_query.Node) bool {
	found := false
	walk(n.ProtoReflect(), func(m protoreflect.Message) bool {
		if c, ok := m.Interface().(*pg_query.ColumnRef); ok {
			if r, err := p.column(c); err == nil && r.private && r.name == p.table.PrivacyUnit {
				found = true
			}
		}
		return !found
	})
	return found
}

// keyFor returns the index of the GROUP BY key that n is, or -1: the same
// column (however qualified) or the same expression.
func (p *planner) keyFor(n *pg_query.Node) int {
	if ref := n.GetColumnRef(); ref != nil {
		c, err := p.column(ref)
		if err != nil {
			return -1
		}
		for i, k := range p.keyCols {
			if k != nil && k.name == c.name && k.private == c.private {
				return i
			}
		}
		return -1
	}
	for i, k := range p.keyNodes {
		if sameTree(k, n) {
			return i
		}
	}
	return -1
}

// isAggregate reports whether a function call is an aggregate (or a known
// one that is refused).
func isAggregate(fc *pg_query.FuncCall) bool {
	schema, name := funcName(fc)
	if schema != "" && schema != "pg_catalog" {
		return false
	}
	return dpAggregates[name] || knownAggregates[name] || fc.AggStar || fc.AggWithinGroup || fc.AggFilter != nil || fc.Over != nil
}

// simpleTargets reports whether every output is a group key or an
// aggregate, which the proxy releases without a post-processing query.
func (p *planner) simpleTargets(sel *pg_query.SelectStmt) bool {
	for _, t := range sel.TargetList {
		v := t.GetResTarget().GetVal()
		if fc := v.GetFuncCall(); fc != nil && isAggregate(fc) {
			continue
		}
		if p.keyFor(v) < 0 {
			return false
		}
	}
	return true
}

func (p *planner) targets(sel *pg_query.SelectStmt, plan *Plan) error {
	for _, t := range sel.TargetList {
		rt := t.GetResTarget()
		v := rt.GetVal()
		if fc := v.GetFuncCall(); fc != nil && isAggregate(fc) {
			agg, err := p.addAggregate(fc)
			if err != nil {
				return err
			}
			plan.Outputs = append(plan.Outputs, Output{GroupKey: -1, Agg: agg})
			continue
		}
		plan.Outputs = append(plan.Outputs, Output{GroupKey: p.keyFor(v)})
	}
	return nil
}

// addAggregate checks an aggregate call and returns its Aggregate, the
// same one for the same text (an aggregate used twice is noised once).
func (p *planner) addAggregate(fc *pg_query.FuncCall) (*Aggregate, error) {
	text, err := deparseExpr(&pg_query.Node{Node: &pg_query.Node_FuncCall{FuncCall: fc}})
	if err != nil {
		return nil, err
	}
	for _, a := range p.aggs {
		if a.Text == text {
			return a, nil
		}
	}
	agg, arg, filter, err := p.aggregate(fc)
	if err != nil {
		return nil, err
	}
	agg.Text = text
	if agg.Kind == AggCountDistinct {
		for _, a := range p.aggs {
			if a.Kind == AggCountDistinct {
				return nil, reject(CodeUnsupported, fc.Location, "only one count(DISTINCT col) per query is supported on private tables (besides the privacy unit)")
			}
		}
	}
	p.aggs = append(p.aggs, agg)
	p.aggArgs = append(p.aggArgs, arg)
	p.aggFilters = append(p.aggFilters, filter)
	return agg, nil
}

// aggregate checks one aggregate call; arg is its argument as printed in
// the rewrite (nil for count(*)), filter its FILTER condition.
func (p *planner) aggregate(fc *pg_query.FuncCall) (agg *Aggregate, arg, filter *pg_query.Node, err error) {
	schema, name := funcName(fc)
	tname := p.table.QualifiedName()
	if schema != "" && schema != "pg_catalog" {
		return nil, nil, nil, reject(CodeForbidden, fc.Location, "function %s.%s is not allowed on private table %s", schema, name, tname)
	}
	if !dpAggregates[name] {
		switch {
		case name == "min" || name == "max":
			return nil, nil, nil, reject(CodeUnsupported, fc.Location, "aggregate %s is not supported on private tables: one person's value would decide it; use percentile_cont(0.0 or 1.0) WITHIN GROUP (ORDER BY col) for a DP estimate", name)
		case name == "median":
			return nil, nil, nil, reject(CodeUnsupported, fc.Location, "median is not a PostgreSQL aggregate; use percentile_cont(0.5) WITHIN GROUP (ORDER BY col)")
		case knownAggregates[name]:
			return nil, nil, nil, reject(CodeUnsupported, fc.Location, "aggregate %s is not supported on private tables; use count, sum, avg, variance, stddev or percentile_cont", name)
		}
		return nil, nil, nil, reject(CodeForbidden, fc.Location, "function %s is not allowed on private table %s", name, tname)
	}
	quantile := name == "percentile_cont" || name == "percentile_disc"
	switch {
	case fc.Over != nil:
		return nil, nil, nil, reject(CodeUnsupported, fc.Location, "window function %s(...) OVER is not supported on private tables", name)
	case quantile && !fc.AggWithinGroup:
		return nil, nil, nil, reject(CodeSyntax, fc.Location, "%s needs WITHIN GROUP (ORDER BY ...)", name)
	case !quantile && (len(fc.AggOrder) > 0 || fc.AggWithinGroup):
		return nil, nil, nil, reject(CodeUnsupported, fc.Location, "ORDER BY inside aggregate %s is not supported", name)
	case fc.FuncVariadic:
		return nil, nil, nil, reject(CodeUnsupported, fc.Location, "VARIADIC in aggregate %s is not supported", name)
	}
	if fc.AggFilter != nil {
		if filter, _, err = p.where(fc.AggFilter); err != nil {
			return nil, nil, nil, err
		}
	}
	agg = &Aggregate{Func: name, SumCol: -1, CountCol: -1, SumSqCol: -1, HistCol: -1}
	if fc.AggStar {
		if name != "count" {
			return nil, nil, nil, reject(CodeSyntax, fc.Location, "%s(*) is not an aggregate", name)
		}
		agg.Kind = AggCount
		return agg, nil, filter, nil
	}
	argNode := (*pg_query.Node)(nil)
	if quantile {
		if len(fc.Args) != 1 || len(fc.AggOrder) != 1 {
			return nil, nil, nil, reject(CodeUnsupported, fc.Location, "%s takes one fraction and one ORDER BY expression here", name)
		}
		q, ok := numConst(fc.Args[0])
		if !ok || !(q >= 0 && q <= 1) {
			return nil, nil, nil, reject(CodeUnsupported, fc.Location, "the fraction of %s must be a constant between 0 and 1 (arrays of fractions are not supported)", name)
		}
		sb := fc.AggOrder[0].GetSortBy()
		if sb == nil || sb.SortbyDir == pg_query.SortByDir_SORTBY_USING || sb.SortbyNulls != pg_query.SortByNulls_SORTBY_NULLS_DEFAULT {
			return nil, nil, nil, reject(CodeUnsupported, fc.Location, "%s supports a plain ORDER BY expression only", name)
		}
		if sb.SortbyDir == pg_query.SortByDir_SORTBY_DESC {
			q = 1 - q
		}
		agg.Kind, agg.Quantile, agg.Discrete, agg.Buckets = AggQuantile, q, name == "percentile_disc", quantileBuckets
		argNode = sb.Node
	} else {
		if len(fc.Args) != 1 {
			return nil, nil, nil, reject(CodeUnsupported, fc.Location, "aggregate %s takes exactly one argument here", name)
		}
		argNode = fc.Args[0]
	}
	if fc.AggDistinct && name != "count" {
		return nil, nil, nil, reject(CodeUnsupported, fc.Location, "DISTINCT inside %s is not supported", name)
	}
	out, _, err := p.value(argNode, false)
	if err != nil {
		return nil, nil, nil, err
	}
	if ref := argNode.GetColumnRef(); ref != nil {
		c, _ := p.column(ref)
		agg.Column = c.name
		if c.private && c.name == p.table.PrivacyUnit {
			if name == "count" && fc.AggDistinct {
				agg.Kind = AggCountDistinctUnit
				return agg, out, filter, nil
			}
			if name != "count" {
				return nil, nil, nil, reject(CodeForbidden, ref.Location, "%s(%s) is refused: %s is the privacy unit", name, c.name, c.name)
			}
		}
	}
	if name == "count" {
		agg.Kind = AggCount
		if fc.AggDistinct {
			agg.Kind = AggCountDistinct
			agg.MaxDistinct = p.table.MaxRowsPerUnit
			if ref := argNode.GetColumnRef(); ref != nil {
				if c, _ := p.column(ref); c.private {
					if col := p.table.Columns[c.name]; col != nil && col.PublicValues != nil {
						agg.MaxDistinct = min(agg.MaxDistinct, int64(len(col.PublicValues)))
					}
				}
			}
		}
		return agg, out, filter, nil
	}
	lo, hi, ok := p.argBounds(argNode)
	if ref := argNode.GetColumnRef(); !ok && ref != nil {
		c, _ := p.column(ref)
		return nil, nil, nil, reject(CodeForbidden, ref.Location, "%s(%s) needs clamping bounds for column %s", name, c.name, c.name).
			withHint("Add lower and upper under tables.%s.columns.%s in the configuration.", tname, c.name)
	}
	if !ok {
		what := describe(argNode)
		return nil, nil, nil, reject(CodeForbidden, fc.Location, "%s(%s) needs clamping bounds: its argument must be a column with lower and upper bounds, or an expression (CASE, arithmetic with constants) of such columns", name, what).
			withHint("Add lower and upper under tables.%s.columns in the configuration.", tname)
	}
	agg.Lower, agg.Upper = lo, hi
	switch name {
	case "sum":
		agg.Kind = AggSum
	case "avg":
		agg.Kind = AggAvg
	case "variance", "var_samp", "var_pop", "stddev", "stddev_samp", "stddev_pop":
		agg.Kind = AggVariance
		agg.Sample = !strings.HasSuffix(name, "_pop")
		agg.Stddev = strings.HasPrefix(name, "stddev")
	case "percentile_cont", "percentile_disc":
		if !(lo < hi) {
			return nil, nil, nil, reject(CodeUnsupported, fc.Location, "%s needs lower < upper bounds for its argument", name)
		}
	}
	return agg, out, filter, nil
}

// numConst returns the value of a numeric constant (possibly cast).
func numConst(n *pg_query.Node) (float64, bool) {
	if tc := n.GetTypeCast(); tc != nil {
		n = tc.Arg
	}
	c := n.GetAConst()
	if c == nil || c.Isnull {
		return 0, false
	}
	switch v := c.Val.(type) {
	case *pg_query.A_Const_Ival:
		return float64(v.Ival.Ival), true
	case *pg_query.A_Const_Fval:
		f, err := strconv.ParseFloat(v.Fval.Fval, 64)
		return f, err == nil && !math.IsInf(f, 0)
	}
	return 0, false
}

// argBounds derives clamping bounds for an aggregate's argument: a
// column's configured bounds, constants, and CASE/COALESCE/arithmetic with
// constants over them. Only the clamp in the rewritten SQL matters for the
// sensitivity; these bounds just make it fit the expression.
func (p *planner) argBounds(n *pg_query.Node) (lo, hi float64, ok bool) {
	lo, hi, empty, ok := p.bounds1(n)
	if empty {
		return 0, 0, false
	}
	return lo, hi, ok && !math.IsInf(lo, 0) && !math.IsInf(hi, 0) && !math.IsNaN(lo) && !math.IsNaN(hi)
}

// bounds1 returns the range of n; empty means n is always NULL.
func (p *planner) bounds1(n *pg_query.Node) (lo, hi float64, empty, ok bool) {
	hull := func(ns []*pg_query.Node) (float64, float64, bool, bool) {
		lo, hi, empty := math.Inf(1), math.Inf(-1), true
		for _, x := range ns {
			l, h, e, ok := p.bounds1(x)
			if !ok {
				return 0, 0, false, false
			}
			if e {
				continue
			}
			lo, hi, empty = math.Min(lo, l), math.Max(hi, h), false
		}
		return lo, hi, empty, true
	}
	switch x := n.GetNode().(type) {
	case *pg_query.Node_ColumnRef:
		c, err := p.column(x.ColumnRef)
		if err != nil || !c.private {
			return 0, 0, false, false
		}
		col := p.table.Columns[c.name]
		if col == nil || !col.HasBounds() || c.name == p.table.PrivacyUnit || !p.numericColumn(x.ColumnRef, c) {
			return 0, 0, false, false
		}
		return *col.Lower, *col.Upper, false, true
	case *pg_query.Node_AConst:
		if x.AConst.Isnull {
			return 0, 0, true, true
		}
		v, ok := numConst(n)
		return v, v, false, ok
	case *pg_query.Node_TypeCast:
		return p.bounds1(x.TypeCast.Arg)
	case *pg_query.Node_CaseExpr:
		var rs []*pg_query.Node
		for _, w := range x.CaseExpr.Args {
			rs = append(rs, w.GetCaseWhen().Result)
		}
		if x.CaseExpr.Defresult != nil {
			rs = append(rs, x.CaseExpr.Defresult)
		}
		return hull(rs)
	case *pg_query.Node_CoalesceExpr:
		return hull(x.CoalesceExpr.Args)
	case *pg_query.Node_AExpr:
		e := x.AExpr
		if e.Kind != pg_query.A_Expr_Kind_AEXPR_OP || len(e.Name) != 1 {
			return 0, 0, false, false
		}
		op := e.Name[0].GetString_().GetSval()
		if e.Lexpr == nil {
			l, h, em, ok := p.bounds1(e.Rexpr)
			if op == "-" {
				return -h, -l, em, ok
			}
			return l, h, em, ok && op == "+"
		}
		a, b, ea, oka := p.bounds1(e.Lexpr)
		c, d, eb, okb := p.bounds1(e.Rexpr)
		if !oka || !okb {
			return 0, 0, false, false
		}
		if ea || eb {
			return 0, 0, true, true
		}
		switch op {
		case "+":
			return a + c, b + d, false, true
		case "-":
			return a - d, b - c, false, true
		case "*":
			ps := []float64{a * c, a * d, b * c, b * d}
			return slicesMin(ps), slicesMax(ps), false, true
		case "/":
			if c != d || c == 0 {
				return 0, 0, false, false
			}
			return math.Min(a/c, b/c), math.Max(a/c, b/c), false, true
		}
	}
	return 0, 0, false, false
}

func slicesMin(v []float64) float64 {
	m := v[0]
	for _, x := range v[1:] {
		m = math.Min(m, x)
	}
	return m
}

func slicesMax(v []float64) float64 {
	m := v[0]
	for _, x := range v[1:] {
		m = math.Max(m, x)
	}
	return m
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// clampCast is the cast applied to an aggregate argument before clamping:
// none for a plain integer column of the private table (clamping and
// summing integers is exact and much cheaper than numeric arithmetic per
// row), ::numeric for everything else, so that sums never run in floating
// point.
func (p *planner) clampCast(arg *pg_query.Node) string {
	if ref := arg.GetColumnRef(); ref != nil {
		if c, err := p.column(ref); err == nil && c.private && p.a.opts.IntegerColumns[p.table.QualifiedName()+"."+c.name] {
			return ""
		}
	}
	return "::numeric"
}

// clampNode is least(greatest((n)::numeric, lo), hi), NULL when n is
// NULL (nullclamp.go).
func clampNode(n *pg_query.Node, lo, hi float64) *pg_query.Node {
	lit := func(v float64) *pg_query.Node {
		s := strconv.FormatFloat(v, 'f', -1, 64)
		neg := strings.HasPrefix(s, "-")
		s = strings.TrimPrefix(s, "-")
		var c *pg_query.Node
		if strings.Contains(s, ".") {
			c = &pg_query.Node{Node: &pg_query.Node_AConst{AConst: &pg_query.A_Const{Val: &pg_query.A_Const_Fval{Fval: &pg_query.Float{Fval: s}}, Location: -1}}}
		} else if i, err := strconv.ParseInt(s, 10, 32); err == nil {
			c = pg_query.MakeAConstIntNode(i, -1)
		} else {
			c = &pg_query.Node{Node: &pg_query.Node_AConst{AConst: &pg_query.A_Const{Val: &pg_query.A_Const_Fval{Fval: &pg_query.Float{Fval: s}}, Location: -1}}}
		}
		if neg {
			return pg_query.MakeAExprNode(pg_query.A_Expr_Kind_AEXPR_OP, []*pg_query.Node{pg_query.MakeStrNode("-")}, nil, c, -1)
		}
		return c
	}
	g := &pg_query.Node{Node: &pg_query.Node_MinMaxExpr{MinMaxExpr: &pg_query.MinMaxExpr{Op: pg_query.MinMaxOp_IS_GREATEST, Args: []*pg_query.Node{numericCast(n), lit(lo)}, Location: -1}}}
	return nullSafeNode(proto.Clone(n).(*pg_query.Node), &pg_query.Node{Node: &pg_query.Node_MinMaxExpr{MinMaxExpr: &pg_query.MinMaxExpr{Op: pg_query.MinMaxOp_IS_LEAST, Args: []*pg_query.Node{g, lit(hi)}, Location: -1}}})
}

func numericCast(n *pg_query.Node) *pg_query.Node {
	return &pg_query.Node{Node: &pg_query.Node_TypeCast{TypeCast: &pg_query.TypeCast{Arg: n, TypeName: &pg_query.TypeName{
		Names: []*pg_query.Node{pg_query.MakeStrNode("pg_catalog"), pg_query.MakeStrNode("numeric")}, Typemod: -1, Location: -1}, Location: -1}}}
}

// Limits of arithmetic over private columns. PostgreSQL's numeric is not
// total: a result beyond about 1e131072, or with more than 16383 digits
// after the point, raises an error, and only for the rows the expression
// is evaluated on (an untaken CASE branch is not), so an overflow would
// tell whether some row exists. The range of every such expression is
// derived from its columns' bounds and constants (bounds1) and must stay
// within ±maxArithValue; its constants may have at most maxArithScale
// digits after the point, at most maxArithConsts of them, and non-integer
// columns are rounded to maxArithScale digits first, so that the result's
// scale stays far below PostgreSQL's limit whatever the rows hold.
const (
	maxArithValue  = 1e100
	maxArithScale  = 30
	maxArithConsts = 16
)

// arithInRange refuses an arithmetic expression over private columns
// whose result could leave numeric's range or scale (see the limits).
func (p *planner) arithInRange(n *pg_query.Node) error {
	tname := p.table.QualifiedName()
	lo, hi, empty, ok := p.bounds1(n)
	if !ok {
		return reject(CodeForbidden, exprLocation(n), "arithmetic %s is refused on private table %s: only bounded columns and constants may be combined (a parameter's value is not known when the query is checked)", describe(n), tname)
	}
	if !empty && !(math.Abs(lo) <= maxArithValue && math.Abs(hi) <= maxArithValue) {
		return reject(CodeForbidden, exprLocation(n), "arithmetic %s is refused on private table %s: its value could exceed ±1e100 (an overflow would depend on private values)", describe(n), tname)
	}
	consts := 0
	var err error
	walk(n.ProtoReflect(), func(m protoreflect.Message) bool {
		c, isConst := m.Interface().(*pg_query.A_Const)
		if !isConst || err != nil {
			return err == nil
		}
		if consts++; consts > maxArithConsts {
			err = reject(CodeForbidden, c.Location, "arithmetic %s is refused on private table %s: at most %d constants may be combined with columns", describe(n), tname, maxArithConsts)
			return false
		}
		if f := c.GetFval(); f != nil && decimalScale(f.Fval) > maxArithScale {
			err = reject(CodeForbidden, c.Location, "constant %s is refused in arithmetic on private table %s: at most %d digits after the point", f.Fval, tname, maxArithScale)
		}
		return err == nil
	})
	return err
}

// decimalScale is the number of digits after the point of a numeric
// literal as PostgreSQL reads it ("1.25" 2, "1e-5" 5, "1.5e3" 0).
func decimalScale(lit string) int {
	mant, exp, _ := strings.Cut(strings.ToLower(lit), "e")
	scale := 0
	if _, frac, ok := strings.Cut(mant, "."); ok {
		scale = len(frac)
	}
	if exp != "" {
		e, err := strconv.Atoi(exp)
		if err != nil {
			return math.MaxInt32
		}
		scale -= e
	}
	return max(scale, 0)
}

// exprLocation is the location of an expression node, or -1.
func exprLocation(n *pg_query.Node) int32 {
	if e := n.GetAExpr(); e != nil {
		return e.Location
	}
	return -1
}

// arithOperand prints a private column as an operand of arithmetic: as
// numeric, and rounded to maxArithScale digits unless it is an integer,
// so that the scale of the result cannot depend on the rows.
func (p *planner) arithOperand(ref *pg_query.ColumnRef, out *pg_query.Node) *pg_query.Node {
	if c, err := p.column(ref); err == nil && p.a.opts.IntegerColumns[p.table.QualifiedName()+"."+c.name] {
		return numericCast(out)
	}
	return &pg_query.Node{Node: &pg_query.Node_FuncCall{FuncCall: &pg_query.FuncCall{
		Funcname:   []*pg_query.Node{pg_query.MakeStrNode("pg_catalog"), pg_query.MakeStrNode("round")},
		Args:       []*pg_query.Node{numericCast(out), pg_query.MakeAConstIntNode(maxArithScale, -1)},
		Funcformat: pg_query.CoercionForm_COERCE_EXPLICIT_CALL, Location: -1}}}
}

// outputName is the column name PostgreSQL gives an output (FigureColname).
func outputName(rt *pg_query.ResTarget) string {
	if rt.Name != "" {
		return rt.Name
	}
	return figureColname(rt.GetVal())
}

func figureColname(n *pg_query.Node) string {
	switch v := n.GetNode().(type) {
	case *pg_query.Node_ColumnRef:
		f := v.ColumnRef.Fields
		if s := f[len(f)-1].GetString_(); s != nil {
			return s.GetSval()
		}
	case *pg_query.Node_FuncCall:
		_, name := funcName(v.FuncCall)
		return name
	case *pg_query.Node_TypeCast:
		if name := figureColname(v.TypeCast.Arg); name != "?column?" {
			return name
		}
		if t := v.TypeCast.TypeName; t != nil && len(t.Names) > 0 {
			return t.Names[len(t.Names)-1].GetString_().GetSval()
		}
	case *pg_query.Node_CaseExpr:
		return "case"
	case *pg_query.Node_CoalesceExpr:
		return "coalesce"
	case *pg_query.Node_MinMaxExpr:
		if v.MinMaxExpr.Op == pg_query.MinMaxOp_IS_GREATEST {
			return "greatest"
		}
		return "least"
	case *pg_query.Node_AExpr:
		if v.AExpr.Kind == pg_query.A_Expr_Kind_AEXPR_NULLIF {
			return "nullif"
		}
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
		if plan.Outputs[out].Agg == nil {
			// A key is sorted by the post-processing query: PostgreSQL
			// orders it by its type, collation and DateStyle, which the
			// proxy's sort of released text cannot reproduce ('10' < '2'
			// for text; dates under DateStyle SQL).
			return reject(CodeUnsupported, -1, "ORDER BY a group key is computed by post-processing")
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
// output. Anything else is sorted by the post-processing query.
func (p *planner) orderOutput(sel *pg_query.SelectStmt, plan *Plan, n *pg_query.Node) (int, error) {
	switch x := n.GetNode().(type) {
	case *pg_query.Node_AConst:
		pos, ok := intConst(x.AConst)
		if !ok {
			return 0, reject(CodeUnsupported, x.AConst.Location, "ORDER BY accepts output positions, output names or expressions")
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
		if _, err := p.column(x.ColumnRef); err != nil {
			return 0, err
		}
	case *pg_query.Node_FuncCall:
		if isAggregate(x.FuncCall) {
			agg, err := p.addAggregate(x.FuncCall)
			if err != nil {
				return 0, err
			}
			for i, o := range plan.Outputs {
				if o.Agg == agg {
					return i, nil
				}
			}
			return 0, reject(CodeUnsupported, x.FuncCall.Location, "ORDER BY %s is not an output", describe(n))
		}
	}
	if k := p.keyFor(n); k >= 0 {
		for i, o := range plan.Outputs {
			if o.Agg == nil && o.GroupKey == k {
				return i, nil
			}
		}
	}
	return 0, reject(CodeUnsupported, -1, "ORDER BY %s is computed by post-processing", describe(n))
}

// postFuncs may be applied to noisy outputs (post-processing): they see
// only released values.
var postFuncs = map[string]bool{
	"round": true, "trunc": true, "abs": true, "ceil": true, "ceiling": true, "floor": true, "sign": true,
	"sqrt": true, "cbrt": true, "power": true, "pow": true, "exp": true, "ln": true, "log": true, "log10": true,
	"to_char": true, "lower": true, "upper": true, "concat": true, "length": true, "date_trunc": true,
	"date_part": true, "extract": true, "div": true, "mod": true,
}

// post builds the post-processing of a query whose outputs, HAVING or
// ORDER BY compute on aggregates: the rewrite releases every group key and
// every aggregate (Outputs), and Plan.Post computes the original select
// list, HAVING, ORDER BY, LIMIT and OFFSET over those noisy values.
func (p *planner) post(orig, sel *pg_query.SelectStmt, plan *Plan) error {
	// Register every aggregate (select list, HAVING, ORDER BY) first.
	var err error
	collect := func(n *pg_query.Node) {
		walk(n.ProtoReflect(), func(m protoreflect.Message) bool {
			if err != nil {
				return false
			}
			if fc, ok := m.Interface().(*pg_query.FuncCall); ok && isAggregate(fc) {
				_, err = p.addAggregate(fc)
				return false
			}
			return true
		})
	}
	for _, t := range sel.TargetList {
		collect(t.GetResTarget().GetVal())
	}
	if sel.HavingClause != nil {
		collect(sel.HavingClause)
	}
	for _, s := range sel.SortClause {
		collect(s.GetSortBy().GetNode())
	}
	if err != nil {
		return err
	}
	nk := len(p.keys)
	plan.Outputs = nil
	for i := range p.keys {
		plan.Outputs = append(plan.Outputs, Output{GroupKey: i})
	}
	for _, a := range p.aggs {
		plan.Outputs = append(plan.Outputs, Output{GroupKey: -1, Agg: a})
	}
	// The intermediate statement: keys and aggregates, for their types.
	mid := proto.Clone(sel).(*pg_query.SelectStmt)
	mid.TargetList, mid.GroupClause = nil, nil
	for _, k := range p.keyNodes {
		mid.TargetList = append(mid.TargetList, pg_query.MakeResTargetNodeWithVal(proto.Clone(k).(*pg_query.Node), -1))
		mid.GroupClause = append(mid.GroupClause, proto.Clone(k).(*pg_query.Node))
	}
	for _, a := range p.aggs {
		tree, perr := pg_query.Parse("SELECT " + a.Text)
		if perr != nil {
			return reject(CodeUnsupported, -1, "aggregate %s cannot be rewritten", a.Text)
		}
		mid.TargetList = append(mid.TargetList, tree.Stmts[0].Stmt.GetSelectStmt().TargetList[0])
	}
	mid.HavingClause, mid.SortClause, mid.LimitCount, mid.LimitOffset = nil, nil, nil, nil
	mid.LimitOption = pg_query.LimitOption_LIMIT_OPTION_DEFAULT
	mn := &pg_query.Node{Node: &pg_query.Node_SelectStmt{SelectStmt: mid}}
	if plan.DescribeSQL, err = deparseStmt(mn); err != nil {
		return err
	}
	if err := faithful(mn, plan.DescribeSQL); err != nil {
		return err
	}
	// subst replaces keys and aggregates by the released columns and
	// refuses anything else that reads the table.
	dpCol := func(i int) *pg_query.Node {
		return &pg_query.Node{Node: &pg_query.Node_ColumnRef{ColumnRef: &pg_query.ColumnRef{
			Fields: []*pg_query.Node{pg_query.MakeStrNode("dp"), pg_query.MakeStrNode("dp_c" + strconv.Itoa(i))}, Location: -1}}}
	}
	subst := func(n *pg_query.Node) (string, error) {
		c := proto.Clone(n).(*pg_query.Node)
		var err error
		replaceNodes(c, func(x *pg_query.Node) bool {
			if err != nil {
				return true
			}
			if fc := x.GetFuncCall(); fc != nil && isAggregate(fc) {
				agg, e := p.addAggregate(fc)
				if e != nil {
					err = e
					return true
				}
				for i, a := range p.aggs {
					if a == agg {
						x.Node = dpCol(nk + i).Node
					}
				}
				return true
			}
			if k := p.keyFor(x); k >= 0 {
				x.Node = dpCol(k).Node
				return true
			}
			switch v := x.Node.(type) {
			case *pg_query.Node_ColumnRef:
				if r, e := p.column(v.ColumnRef); e != nil {
					err = e
				} else {
					err = reject(CodeForbidden, v.ColumnRef.Location, "column %s must appear in GROUP BY or be used in an aggregate: returning it would reveal individual rows of private table %s", r.name, p.table.QualifiedName())
				}
				return true
			case *pg_query.Node_FuncCall:
				schema, name := funcName(v.FuncCall)
				if (schema != "" && schema != "pg_catalog") || !postFuncs[name] || v.FuncCall.Over != nil {
					err = reject(CodeForbidden, v.FuncCall.Location, "function %s is not allowed on the results of a query over private table %s", name, p.table.QualifiedName())
					return true
				}
			case *pg_query.Node_SubLink:
				err = reject(CodeUnsupported, v.SubLink.Location, "subqueries are not supported in queries over private table %s", p.table.QualifiedName())
				return true
			case *pg_query.Node_ParamRef:
				err = reject(CodeUnsupported, v.ParamRef.Location, "parameters are not supported in expressions over aggregates (HAVING, outputs) on private tables")
				return true
			}
			return false
		})
		if err != nil {
			return "", err
		}
		// Nothing but dp columns may remain.
		walk(c.ProtoReflect(), func(m protoreflect.Message) bool {
			if cr, ok := m.Interface().(*pg_query.ColumnRef); ok && err == nil {
				if len(cr.Fields) != 2 || cr.Fields[0].GetString_().GetSval() != "dp" {
					err = reject(CodeForbidden, cr.Location, "an output of a query over private table %s may only compute on group keys and aggregates", p.table.QualifiedName())
				}
			}
			return err == nil
		})
		if err != nil {
			return "", err
		}
		return deparseExpr(c)
	}
	post := &Post{}
	var targets []string
	for _, t := range sel.TargetList {
		if cr := t.GetResTarget().GetVal().GetColumnRef(); cr != nil {
			if _, err := p.column(cr); err != nil {
				return err
			}
		}
	}
	for i, t := range sel.TargetList {
		s, err := subst(t.GetResTarget().GetVal())
		if err != nil {
			return err
		}
		name, err := quoteIdent(outputName(orig.TargetList[i].GetResTarget()))
		if err != nil {
			return err
		}
		targets = append(targets, s+" AS "+name)
	}
	post.Targets = strings.Join(targets, ", ")
	if sel.HavingClause != nil {
		if post.Where, err = subst(sel.HavingClause); err != nil {
			return err
		}
	}
	var order []string
	for _, s := range sel.SortClause {
		sb := proto.Clone(s.GetSortBy()).(*pg_query.SortBy)
		if sb.SortbyDir == pg_query.SortByDir_SORTBY_USING {
			return reject(CodeUnsupported, -1, "ORDER BY ... USING is not supported on private tables")
		}
		keep := false
		switch x := sb.Node.GetNode().(type) {
		case *pg_query.Node_AConst:
			pos, ok := intConst(x.AConst)
			if !ok || pos < 1 || pos > int64(len(sel.TargetList)) {
				return reject(CodeBadPosition, x.AConst.Location, "ORDER BY position is not in select list")
			}
			keep = true
		case *pg_query.Node_ColumnRef:
			if f := x.ColumnRef.Fields; len(f) == 1 && f[0].GetString_() != nil {
				for _, t := range orig.TargetList {
					if outputName(t.GetResTarget()) == f[0].GetString_().GetSval() {
						keep = true
					}
				}
			}
		}
		if !keep {
			s, err := subst(sb.Node)
			if err != nil {
				return err
			}
			tree, perr := pg_query.Parse("SELECT " + s)
			if perr != nil {
				return reject(CodeUnsupported, -1, "ORDER BY cannot be rewritten")
			}
			sb.Node = tree.Stmts[0].Stmt.GetSelectStmt().TargetList[0].GetResTarget().Val
		}
		q := &pg_query.SelectStmt{TargetList: []*pg_query.Node{pg_query.MakeResTargetNodeWithVal(pg_query.MakeAConstIntNode(1, -1), -1)},
			SortClause: []*pg_query.Node{{Node: &pg_query.Node_SortBy{SortBy: sb}}}, LimitOption: pg_query.LimitOption_LIMIT_OPTION_DEFAULT, Op: pg_query.SetOperation_SETOP_NONE}
		txt, err := deparseStmt(&pg_query.Node{Node: &pg_query.Node_SelectStmt{SelectStmt: q}})
		if err != nil {
			return err
		}
		o, ok := strings.CutPrefix(txt, "SELECT 1 ORDER BY ")
		if !ok {
			return reject(CodeUnsupported, -1, "ORDER BY cannot be rewritten")
		}
		order = append(order, o)
	}
	post.OrderBy = strings.Join(order, ", ")
	plan.Post = post
	plan.OrderBy = nil
	return nil
}

// replaceNodes visits every Node wrapper below n (pre-order); fn may change
// x.Node in place and returns true to skip x's children.
func replaceNodes(n *pg_query.Node, fn func(x *pg_query.Node) bool) {
	var visit func(m protoreflect.Message)
	visit = func(m protoreflect.Message) {
		if x, ok := m.Interface().(*pg_query.Node); ok && fn(x) {
			return
		}
		children(m, "", visit)
	}
	visit(n.ProtoReflect())
}

// flatten returns a copy of sel in which every CTE, and every derived
// table that reads a private table, is inlined: its FROM replaces it, its
// WHERE filters its rows where they enter the outer query (inlineWhere:
// the outer WHERE, or the ON of the outer join whose nullable side it is
// on), and the outer references to its columns are replaced by its
// select-list expressions, their columns qualified with its relation
// (qualifyColumns) so that they keep their meaning in the outer scope.
// Only derived tables that filter, project or join qualify; one that
// aggregates, sorts with a limit, or removes duplicates is refused with
// the reason.
func (a *Analyzer) flatten(sel *pg_query.SelectStmt) (*pg_query.SelectStmt, error) {
	sel = proto.Clone(sel).(*pg_query.SelectStmt)
	ctes := map[string]*pg_query.CommonTableExpr{}
	if w := sel.WithClause; w != nil {
		if w.Recursive {
			return nil, reject(CodeUnsupported, w.Location, "WITH RECURSIVE over a private table is not supported")
		}
		for _, c := range w.Ctes {
			cte := c.GetCommonTableExpr()
			if len(cte.Aliascolnames) > 0 {
				return nil, reject(CodeUnsupported, cte.Location, "column names on CTE %s are not supported over a private table", cte.Ctename)
			}
			ctes[cte.Ctename] = cte
		}
		sel.WithClause = nil
	}
	type derived struct {
		alias string
		cols  map[string]*pg_query.Node
		star  *pg_query.Node // qualifier for names not listed (nil: none)
	}
	var ds []*derived
	used := map[string]bool{}
	// item inlines the derived tables of one FROM item and returns it with
	// the WHERE clauses that must still filter its rows (inlineWhere).
	var item func(n *pg_query.Node) (*pg_query.Node, []*pg_query.Node, error)
	item = func(n *pg_query.Node) (*pg_query.Node, []*pg_query.Node, error) {
		var inner *pg_query.SelectStmt
		var alias string
		var loc int32 = -1
		switch x := n.GetNode().(type) {
		case *pg_query.Node_JoinExpr:
			l, lw, err := item(x.JoinExpr.Larg)
			if err != nil {
				return nil, nil, err
			}
			r, rw, err := item(x.JoinExpr.Rarg)
			if err != nil {
				return nil, nil, err
			}
			x.JoinExpr.Larg, x.JoinExpr.Rarg = l, r
			up, err := inlineWhere(x.JoinExpr, lw, rw)
			return n, up, err
		case *pg_query.Node_RangeVar:
			rv := x.RangeVar
			cte := ctes[rv.Relname]
			if cte == nil || rv.Schemaname != "" {
				return n, nil, nil
			}
			if used[rv.Relname] {
				return nil, nil, reject(CodeUnsupported, rv.Location, "CTE %s is read twice: a private table may be read only once per query", rv.Relname)
			}
			used[rv.Relname] = true
			inner = cte.Ctequery.GetSelectStmt()
			alias, loc = rv.Relname, rv.Location
			if rv.Alias != nil {
				if len(rv.Alias.Colnames) > 0 {
					return nil, nil, reject(CodeUnsupported, rv.Location, "column aliases on CTE %s are not supported", rv.Relname)
				}
				alias = rv.Alias.Aliasname
			}
		case *pg_query.Node_RangeSubselect:
			rs := x.RangeSubselect
			if !a.readsPrivate(rs.Subquery) {
				return n, nil, nil
			}
			if rs.Lateral {
				return nil, nil, reject(CodeUnsupported, -1, "LATERAL subqueries over a private table are not supported")
			}
			inner = rs.Subquery.GetSelectStmt()
			if rs.Alias != nil {
				if len(rs.Alias.Colnames) > 0 {
					return nil, nil, reject(CodeUnsupported, -1, "column aliases on a derived table over a private table are not supported")
				}
				alias = rs.Alias.Aliasname
			}
		default:
			return n, nil, nil
		}
		if inner == nil {
			return nil, nil, reject(CodeUnsupported, loc, "a derived table over a private table must be a SELECT")
		}
		flat, err := a.flatten(inner)
		if err != nil {
			return nil, nil, err
		}
		if err := a.inlinable(flat, loc); err != nil {
			return nil, nil, err
		}
		qualifyColumns(flat)
		d := &derived{alias: alias, cols: map[string]*pg_query.Node{}}
		var where []*pg_query.Node
		if flat.WhereClause != nil {
			where = append(where, flat.WhereClause)
		}
		for _, t := range flat.TargetList {
			rt := t.GetResTarget()
			v := rt.GetVal()
			if cr := v.GetColumnRef(); cr != nil && cr.Fields[len(cr.Fields)-1].GetAStar() != nil {
				if len(cr.Fields) > 1 {
					d.star = &pg_query.Node{Node: &pg_query.Node_ColumnRef{ColumnRef: &pg_query.ColumnRef{Fields: cr.Fields[:len(cr.Fields)-1]}}}
				} else {
					d.star = &pg_query.Node{Node: &pg_query.Node_ColumnRef{ColumnRef: &pg_query.ColumnRef{}}}
					if len(flat.FromClause) == 1 {
						if rv := flat.FromClause[0].GetRangeVar(); rv != nil {
							q := rv.Relname
							if rv.Alias != nil {
								q = rv.Alias.Aliasname
							}
							d.star.GetColumnRef().Fields = []*pg_query.Node{pg_query.MakeStrNode(q)}
						}
					}
				}
				continue
			}
			name := outputName(rt)
			if _, dup := d.cols[name]; dup {
				d.cols[name] = nil // ambiguous
				continue
			}
			d.cols[name] = v
		}
		ds = append(ds, d)
		if len(flat.FromClause) != 1 {
			// several comma-separated items become one cross join
			j := flat.FromClause[0]
			for _, f := range flat.FromClause[1:] {
				j = &pg_query.Node{Node: &pg_query.Node_JoinExpr{JoinExpr: &pg_query.JoinExpr{Jointype: pg_query.JoinType_JOIN_INNER, Larg: j, Rarg: f}}}
			}
			return j, where, nil
		}
		return flat.FromClause[0], where, nil
	}
	// Replace outer references before the FROM items, so that the inlined
	// FROM (whose own references belong to the inner scope) is untouched.
	var items []*pg_query.Node
	for _, f := range sel.FromClause {
		// dry run to learn the derived tables' columns
		c := proto.Clone(f).(*pg_query.Node)
		it, _, e := item(c)
		if e != nil {
			return nil, e
		}
		items = append(items, it)
	}
	if len(ds) == 0 {
		return sel, nil
	}
	single := len(sel.FromClause) == 1 && sel.FromClause[0].GetJoinExpr() == nil
	var serr error
	resolveRef := func(cr *pg_query.ColumnRef) *pg_query.Node {
		n := len(cr.Fields)
		if cr.Fields[n-1].GetAStar() != nil {
			return nil
		}
		name := cr.Fields[n-1].GetString_().GetSval()
		for _, d := range ds {
			match := false
			switch {
			case n == 2 && cr.Fields[0].GetString_().GetSval() == d.alias:
				match = true
			case n == 1 && (single || d.cols[name] != nil):
				match = true
			}
			if !match {
				continue
			}
			if v, ok := d.cols[name]; ok {
				if v == nil {
					serr = reject(CodeAmbiguous, cr.Location, "column reference %q is ambiguous", name)
					return nil
				}
				return proto.Clone(v).(*pg_query.Node)
			}
			if d.star != nil {
				f := append([]*pg_query.Node{}, d.star.GetColumnRef().Fields...)
				return &pg_query.Node{Node: &pg_query.Node_ColumnRef{ColumnRef: &pg_query.ColumnRef{Fields: append(f, pg_query.MakeStrNode(name)), Location: cr.Location}}}
			}
			if n == 2 {
				serr = reject(CodeBadColumnRef, cr.Location, "column %s.%s does not exist", d.alias, name)
			}
			return nil
		}
		return nil
	}
	outer := []*pg_query.Node{}
	outer = append(outer, sel.TargetList...)
	outer = append(outer, sel.GroupClause...)
	outer = append(outer, sel.SortClause...)
	for _, n := range []*pg_query.Node{sel.WhereClause, sel.HavingClause} {
		if n != nil {
			outer = append(outer, n)
		}
	}
	// join conditions of the outer FROM
	for _, f := range sel.FromClause {
		walk(f.ProtoReflect(), func(m protoreflect.Message) bool {
			switch x := m.Interface().(type) {
			case *pg_query.RangeSubselect:
				return false
			case *pg_query.JoinExpr:
				if x.Quals != nil {
					outer = append(outer, x.Quals)
				}
			}
			return true
		})
	}
	for _, n := range outer {
		replaceNodes(n, func(x *pg_query.Node) bool {
			switch v := x.Node.(type) {
			case *pg_query.Node_ColumnRef:
				if r := resolveRef(v.ColumnRef); r != nil {
					x.Node = r.Node
				}
				return true
			case *pg_query.Node_SubLink:
				return true
			}
			return false
		})
		if serr != nil {
			return nil, serr
		}
	}
	// Now rebuild the FROM on the original (substituted join quals included).
	ds = nil
	used = map[string]bool{}
	items = items[:0]
	var wheres []*pg_query.Node
	for _, f := range sel.FromClause {
		it, w, e := item(f)
		if e != nil {
			return nil, e
		}
		items = append(items, it)
		wheres = append(wheres, w...)
	}
	sel.FromClause = items
	for _, w := range wheres {
		sel.WhereClause = andNodes(w, sel.WhereClause)
	}
	return sel, nil
}

// andNodes is a AND b (a alone when b is nil).
func andNodes(a, b *pg_query.Node) *pg_query.Node {
	if b == nil {
		return a
	}
	return &pg_query.Node{Node: &pg_query.Node_BoolExpr{BoolExpr: &pg_query.BoolExpr{
		Boolop: pg_query.BoolExprType_AND_EXPR, Args: []*pg_query.Node{a, b}, Location: -1}}}
}

// inlineWhere places the WHERE clauses of the derived tables inlined into
// the two sides of join j (left, right) and returns those that must
// filter j's own rows. A filter f on the columns of one side commutes
// with an inner join and with the preserved side of an outer join
// (σf(A) ⋈ B = σf(A ⋈ B), σf(A) ⟕ B = σf(A ⟕ B)), so it moves up, in the
// end to the outer WHERE; on the nullable side of an outer join it
// becomes part of the join's condition (A ⟕ σf(B) = A ⟕ B ON … AND f):
// in the outer WHERE it would drop the rows the outer join keeps without
// a match, and the join would count as an inner one (issue 12).
func inlineWhere(j *pg_query.JoinExpr, left, right []*pg_query.Node) ([]*pg_query.Node, error) {
	var on []*pg_query.Node
	up := left
	switch j.Jointype {
	case pg_query.JoinType_JOIN_INNER:
		up = append(up, right...)
	case pg_query.JoinType_JOIN_LEFT:
		on = right
	case pg_query.JoinType_JOIN_RIGHT:
		up, on = right, left
	default:
		on = append(left, right...)
		if len(on) > 0 {
			return nil, reject(CodeUnsupported, -1, "a derived table or CTE with WHERE on a side of this kind of join is not supported over a private table: write the join with the table itself")
		}
	}
	if len(on) == 0 {
		return up, nil
	}
	if len(j.UsingClause) > 0 || j.IsNatural || j.Quals == nil {
		return nil, reject(CodeUnsupported, -1, "a CTE or derived table with WHERE on the nullable side of an outer join needs an ON condition to hold its WHERE: write the join with ON instead of USING or NATURAL")
	}
	for _, w := range on {
		j.Quals = andNodes(j.Quals, w)
	}
	return up, nil
}

// qualifyColumns qualifies the unqualified column references of a derived
// table's select list and WHERE with its only relation, so that they
// still mean its columns once inlined into the outer query, where a
// joined table may have a column of the same name (issue 12: 42702 after
// the charge). Names are unique in a FROM of one relation; with several,
// they are left as written: the outer query still holds every inner
// relation, so an unqualified name can only become ambiguous (an error
// PostgreSQL reports), never mean another relation's column.
func qualifyColumns(s *pg_query.SelectStmt) {
	if len(s.FromClause) != 1 {
		return
	}
	rv := s.FromClause[0].GetRangeVar()
	if rv == nil {
		return
	}
	q := rv.Relname
	if rv.Alias != nil {
		q = rv.Alias.Aliasname
	}
	fix := func(n *pg_query.Node) {
		if n == nil {
			return
		}
		replaceNodes(n, func(x *pg_query.Node) bool {
			switch v := x.Node.(type) {
			case *pg_query.Node_ColumnRef:
				if f := v.ColumnRef.Fields; len(f) == 1 && f[0].GetString_() != nil {
					v.ColumnRef.Fields = []*pg_query.Node{pg_query.MakeStrNode(q), f[0]}
				}
				return true
			case *pg_query.Node_SubLink:
				return true
			}
			return false
		})
	}
	for _, t := range s.TargetList {
		fix(t.GetResTarget().GetVal())
	}
	fix(s.WhereClause)
}

// readsPrivate reports whether a subquery reads a private table.
func (a *Analyzer) readsPrivate(n *pg_query.Node) bool {
	refs := collectRels(n.ProtoReflect())
	if err := a.resolve(refs); err != nil {
		return true // refused later with its own reason
	}
	return hasPrivate(refs)
}

// inlinable checks that a derived table or CTE only filters, projects or
// joins, so that inlining it keeps its meaning.
func (a *Analyzer) inlinable(s *pg_query.SelectStmt, loc int32) error {
	switch {
	case s.Op != pg_query.SetOperation_SETOP_NONE:
		return reject(CodeUnsupported, loc, "set operations in a derived table over a private table are not supported")
	case len(s.GroupClause) > 0 || s.HavingClause != nil || hasAggregate(s.TargetList):
		return reject(CodeUnsupported, loc, "a derived table or CTE that aggregates a private table (for example one row per person with count(*)) is not supported: "+
			"the outer aggregate would need bounds on those per-person values, which the configuration does not give; aggregate the table directly, e.g. count(*) / count(DISTINCT unit) for an average per person").
			withHint("Per-person statistics need bounds: compute them as sum/count over the table, whose contributions are bounded.")
	case len(s.DistinctClause) > 0:
		return reject(CodeUnsupported, loc, "DISTINCT in a derived table over a private table is not supported")
	case s.LimitCount != nil || s.LimitOffset != nil:
		return reject(CodeUnsupported, loc, "LIMIT/OFFSET in a derived table over a private table is not supported: which rows it keeps would depend on other people's rows")
	case len(s.WindowClause) > 0:
		return reject(CodeUnsupported, loc, "window functions in a derived table over a private table are not supported")
	case len(s.FromClause) == 0:
		return reject(CodeUnsupported, loc, "a derived table over a private table needs a FROM clause")
	case len(s.ValuesLists) > 0:
		return reject(CodeUnsupported, loc, "VALUES in a derived table over a private table is not supported")
	}
	var err error
	for _, t := range s.TargetList {
		walk(t.ProtoReflect(), func(m protoreflect.Message) bool {
			if fc, ok := m.Interface().(*pg_query.FuncCall); ok && fc.Over != nil && err == nil {
				err = reject(CodeUnsupported, fc.Location, "window functions in a derived table over a private table are not supported")
			}
			return err == nil
		})
	}
	return err
}

func hasAggregate(ns []*pg_query.Node) bool {
	found := false
	for _, n := range ns {
		walk(n.ProtoReflect(), func(m protoreflect.Message) bool {
			if fc, ok := m.Interface().(*pg_query.FuncCall); ok && isAggregate(fc) && fc.Over == nil {
				found = true
			}
			return !found
		})
	}
	return found
}

// deps says what an expression depends on besides constants.
type deps uint8

const (
	depColumn deps = 1 << iota // a column of the private table
	depParam                   // a client parameter ($n)
)

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

// fromSQL prints the FROM clause of the per-unit pre-aggregation: the
// private table and its joins, every table schema-qualified.
func (p *planner) fromSQL(items []*pg_query.Node) (string, error) {
	var cl []*pg_query.Node
	for _, it := range items {
		c := proto.Clone(it).(*pg_query.Node)
		cl = append(cl, c)
	}
	// Qualify every table with its schema; the clones' RangeVars are
	// matched to the originals by position in a parallel walk.
	var origs, clones []*pg_query.RangeVar
	for i := range items {
		walk(items[i].ProtoReflect(), func(m protoreflect.Message) bool {
			if rv, ok := m.Interface().(*pg_query.RangeVar); ok {
				origs = append(origs, rv)
			}
			return true
		})
		walk(cl[i].ProtoReflect(), func(m protoreflect.Message) bool {
			if rv, ok := m.Interface().(*pg_query.RangeVar); ok {
				clones = append(clones, rv)
			}
			return true
		})
	}
	for i, rv := range clones {
		if r := p.rels[origs[i]]; r != nil && r.schema != "" {
			rv.Schemaname = r.schema
		}
	}
	sel := &pg_query.SelectStmt{
		TargetList:  []*pg_query.Node{pg_query.MakeResTargetNodeWithVal(pg_query.MakeAConstIntNode(1, -1), -1)},
		FromClause:  cl,
		LimitOption: pg_query.LimitOption_LIMIT_OPTION_DEFAULT,
		Op:          pg_query.SetOperation_SETOP_NONE,
	}
	n := &pg_query.Node{Node: &pg_query.Node_SelectStmt{SelectStmt: sel}}
	s, err := deparseStmt(n)
	if err != nil {
		return "", err
	}
	if err := faithful(n, s); err != nil {
		return "", err
	}
	out, ok := strings.CutPrefix(s, "SELECT 1 FROM ")
	if !ok {
		return "", reject(CodeUnsupported, -1, "FROM clause cannot be rewritten")
	}
	return out, nil
}

// sql writes the rewritten query (docs/design.md, "The rewrite template")
// and fills in the result column indexes of the plan.
func (p *planner) sql(sel *pg_query.SelectStmt, plan *Plan) (string, error) {
	unit, err := quoteIdent(p.table.PrivacyUnit)
	if err != nil {
		return "", err
	}
	if p.joined {
		q, err := quoteIdent(p.refName)
		if err != nil {
			return "", err
		}
		unit = q + "." + unit
	}
	from, err := p.fromSQL(sel.FromClause)
	if err != nil {
		return "", err
	}
	r := intLit(p.table.MaxRowsPerUnit)
	seed := "$" + strconv.Itoa(plan.SeedParam()) + "::bigint"

	var distinct *pg_query.Node // the argument of count(DISTINCT col)
	var distinctFilter *pg_query.Node
	for i, a := range p.aggs {
		if a.Kind == AggCountDistinct {
			distinct, distinctFilter = p.aggArgs[i], p.aggFilters[i]
		}
	}
	plan.DistinctValues = distinct != nil

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
		e, err := parenExpr(p.keySQL[i])
		if err != nil {
			return "", err
		}
		keyCols[i] = "g" + strconv.Itoa(i)
		inner = append(inner, e+" AS "+keyCols[i])
		innerGroup = append(innerGroup, e)
		p.keys[i].ResultCol = i
		p.keys[i].Expr = e
		if pv := p.keys[i].PublicValues; pv != nil {
			lits := make([]string, len(pv))
			for j, v := range pv {
				lits[j] = quoteLiteral(v)
			}
			where = append(where, e+"::text IN ("+strings.Join(lits, ", ")+")")
		}
	}
	// dp_n is the unit's number of rows in the group; in the distinct
	// template the innermost rows are per value (dp_nv), and dp_n is their
	// window sum per (unit, group).
	if distinct != nil {
		e, err := parenExpr(distinct)
		if err != nil {
			return "", err
		}
		inner = append(inner, e+" AS dp_v", "count(*) AS dp_nv")
		innerGroup = append(innerGroup, e)
		if distinctFilter != nil {
			f, err := deparseExpr(distinctFilter)
			if err != nil {
				return "", err
			}
			inner = append(inner, "count(*) FILTER (WHERE "+f+") AS dp_vf")
		}
	} else {
		inner = append(inner, "count(*) AS dp_n")
	}
	plan.UnitsCol = len(p.keys)
	perUnit := []string{} // per-unit components carried to the outer query
	var outer []string
	outer = append(outer, keyCols...)
	if distinct != nil {
		outer = append(outer, "count(DISTINCT dp_u) AS dp_units")
	} else {
		outer = append(outer, "count(*) AS dp_units")
	}
	next := len(p.keys) + 1
	comp := func(expr string) int {
		col := next
		outer = append(outer, fmt.Sprintf("%s AS a%d", expr, col-len(p.keys)-1))
		next++
		return col
	}
	scaled := func(c string) string { return "sum(" + c + " * least(1, " + r + "::numeric / dp_n))" }
	for i, agg := range p.aggs {
		var col string
		if arg := p.aggArgs[i]; arg != nil {
			if col, err = deparseExpr(arg); err != nil {
				return "", err
			}
		}
		filter := ""
		if f := p.aggFilters[i]; f != nil {
			fs, err := deparseExpr(f)
			if err != nil {
				return "", err
			}
			filter = " FILTER (WHERE " + fs + ")"
		}
		s, c, q := "s"+strconv.Itoa(i), "c"+strconv.Itoa(i), "q"+strconv.Itoa(i)
		// v is the clamped argument as numeric; vSum may skip the cast for
		// an integer column (SUM and AVG only: variance squares and
		// quantiles bucket the value, which must not overflow or change
		// type).
		v := nullSafeSQL(col, fmt.Sprintf("least(greatest((%s)::numeric, %s), %s)", col, numLit(agg.Lower), numLit(agg.Upper)))
		vSum := nullSafeSQL(col, fmt.Sprintf("least(greatest((%s)%s, %s), %s)", col, p.clampCast(p.aggArgs[i]), numLit(agg.Lower), numLit(agg.Upper)))
		switch agg.Kind {
		case AggCount:
			switch {
			case p.aggArgs[i] == nil && filter == "" && distinct == nil:
				agg.CountCol = comp("sum(least(dp_n, " + r + "))")
			case p.aggArgs[i] == nil:
				inner = append(inner, "count(*)"+filter+" AS "+c)
				perUnit = append(perUnit, c)
				agg.CountCol = comp(scaled(c))
			default:
				inner = append(inner, "count("+col+")"+filter+" AS "+c)
				perUnit = append(perUnit, c)
				agg.CountCol = comp(scaled(c))
			}
		case AggCountDistinctUnit:
			switch {
			case filter != "":
				inner = append(inner, "count(*)"+filter+" AS "+c)
				perUnit = append(perUnit, c)
				agg.CountCol = comp("count(DISTINCT dp_u) FILTER (WHERE " + c + " > 0)")
			case distinct != nil:
				agg.CountCol = comp("count(DISTINCT dp_u)")
			default:
				agg.CountCol = comp("count(dp_u)")
			}
		case AggCountDistinct:
			cond := "dp_v IS NOT NULL AND dp_vrank <= " + intLit(agg.MaxDistinct)
			if filter != "" {
				cond += " AND dp_vf > 0"
			}
			agg.CountCol = comp("count(DISTINCT dp_v) FILTER (WHERE " + cond + ")")
		case AggSum:
			inner = append(inner, "sum("+vSum+")"+filter+" AS "+s)
			perUnit = append(perUnit, s)
			agg.SumCol = comp(scaled(s))
		case AggAvg:
			inner = append(inner, "sum("+vSum+")"+filter+" AS "+s, "count("+col+")"+filter+" AS "+c)
			perUnit = append(perUnit, s, c)
			agg.SumCol = comp(scaled(s))
			agg.CountCol = comp(scaled(c))
		case AggVariance:
			mid := numLit((agg.Lower + agg.Upper) / 2)
			d := "(" + v + " - " + mid + ")"
			inner = append(inner, "count("+col+")"+filter+" AS "+c, "sum"+d+filter+" AS "+s, "sum("+d+" * "+d+")"+filter+" AS "+q)
			perUnit = append(perUnit, c, s, q)
			agg.CountCol = comp(scaled(c))
			agg.SumCol = comp(scaled(s))
			agg.SumSqCol = comp(scaled(q))
		case AggQuantile:
			wb := fmt.Sprintf("least(width_bucket(%s, %s, %s, %d), %d)", v, numLit(agg.Lower), numLit(agg.Upper), agg.Buckets, agg.Buckets)
			f := ""
			if fl := p.aggFilters[i]; fl != nil {
				fs, _ := deparseExpr(fl)
				f = "(" + fs + ") AND "
			}
			var cells []string
			for b := 1; b <= agg.Buckets; b++ {
				h := fmt.Sprintf("h%d_%d", i, b)
				inner = append(inner, fmt.Sprintf("count(*) FILTER (WHERE %s%s = %d) AS %s", f, wb, b, h))
				perUnit = append(perUnit, h)
				cells = append(cells, scaled(h))
			}
			agg.HistCol = comp("ARRAY[" + strings.Join(cells, ", ") + "]")
		}
	}

	var b strings.Builder
	nested := len(p.keys) > 0 || distinct != nil
	indent := "  "
	if nested {
		indent = "    "
	}
	innerSQL := indent + "SELECT " + strings.Join(inner, ", ") + "\n" + indent + "FROM " + from + "\n"
	if len(where) > 0 {
		innerSQL += indent + "WHERE " + strings.Join(where, " AND ") + "\n"
	}
	innerSQL += indent + "GROUP BY " + strings.Join(innerGroup, ", ") + "\n"

	b.WriteString("SELECT " + strings.Join(outer, ", ") + "\nFROM (\n")
	if !nested {
		b.WriteString(innerSQL)
		b.WriteString(") AS dp_per_unit\n")
		// Without GROUP BY each unit touches one group, so no group is
		// sampled; the seed is still referenced so that every plan takes
		// exactly SeedParam() parameters.
		b.WriteString("WHERE " + seed + " IS NOT NULL")
		return b.String(), nil
	}
	mid := append([]string{"dp_u"}, keyCols...)
	// Each unit ranks its groups (and, for COUNT(DISTINCT), its values)
	// by a hash of the unit, the keys and a fresh secret seed, then by
	// the keys themselves, so that ties (concat_ws skips NULLs and does
	// not escape '|') are broken by the unit's own data and never by the
	// order rows arrive in. Which groups a unit keeps depends on nothing
	// but its own rows and the seed; the hash only has to spread the
	// choice evenly, and hashtextextended does that at a fraction of
	// md5's cost, with a bigint that sorts faster than md5's hex text.
	hashOf := func(cols []string) string {
		return "hashtextextended(concat_ws('|', " + strings.Join(cols, ", ") + "), " + seed + ")"
	}
	hashArgs := append([]string{"dp_u"}, keyCols...)
	hash := hashOf(hashArgs)
	if len(keyCols) > 0 {
		hash += ", " + strings.Join(keyCols, ", ")
	}
	if distinct != nil {
		part := strings.Join(append([]string{"dp_u"}, keyCols...), ", ")
		mid = append(mid, "dp_v", "dp_nv")
		if distinctFilter != nil {
			mid = append(mid, "dp_vf")
		}
		mid = append(mid, perUnit...)
		mid = append(mid, "sum(dp_nv) OVER (PARTITION BY "+part+") AS dp_n")
		order := "(dp_v IS NULL)"
		if distinctFilter != nil {
			order = "(dp_v IS NULL OR dp_vf = 0)"
		}
		vhash := hashOf(append(hashArgs, "dp_v")) + ", dp_v"
		mid = append(mid, "row_number() OVER (PARTITION BY "+part+" ORDER BY "+order+", "+vhash+") AS dp_vrank")
		if len(p.keys) > 0 {
			// dense_rank: a unit's rows of one group share a rank; ordering
			// by the keys after the hash keeps distinct groups distinct.
			mid = append(mid, "dense_rank() OVER (PARTITION BY dp_u ORDER BY "+hash+") AS dp_rank")
		}
	} else {
		mid = append(mid, "dp_n")
		mid = append(mid, perUnit...)
		mid = append(mid, "row_number() OVER (PARTITION BY dp_u ORDER BY "+hash+") AS dp_rank")
	}
	b.WriteString("  SELECT " + strings.Join(mid, ", ") + "\n  FROM (\n")
	b.WriteString(innerSQL)
	b.WriteString("  ) AS dp_per_unit\n) AS dp_ranked\n")
	switch {
	case len(p.keys) > 0:
		b.WriteString("WHERE dp_rank <= " + intLit(p.table.MaxGroupsPerUnit) + "\n")
		b.WriteString("GROUP BY " + strings.Join(keyCols, ", "))
	default:
		b.WriteString("WHERE " + seed + " IS NOT NULL")
	}
	return b.String(), nil
}
