package rewrite

import (
	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// The planner of a private query: plan runs the phases in order (doc.go)
// over one SELECT that reads a private table, and planner holds what the
// phases learn about it.

// planner holds what is known while one private query is checked.
type planner struct {
	// mentionMemo remembers mentionsColumn per node during one
	// arithDigits call (arith.go); nil otherwise.
	mentionMemo map[*pg_query.Node]bool
	a           *Analyzer
	table       *conf.Table
	rv          *pg_query.RangeVar
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
	// keys are the GROUP BY keys, in order.
	keys []plannedKey
	// aggs are the distinct aggregates (by text), in order.
	aggs []plannedAgg
	// width is the number of columns of the rewritten query's result
	// (layout.go).
	width int
	// tot collects the hoisted constants and type checks (hoist.go).
	tot totality
}

// plannedKey is one GROUP BY key as planned.
type plannedKey struct {
	key GroupKey
	// node is the expression as written, sql the expression to print in
	// the rewrite (columns in arithmetic cast to numeric).
	node, sql *pg_query.Node
	col       *colRef // a plain-column key's column, nil for an expression
}

// plannedAgg is one distinct aggregate (by text) as planned.
type plannedAgg struct {
	agg *Aggregate
	// arg is its argument as printed (nil for count(*)); filter its
	// FILTER (nil if none).
	arg, filter *pg_query.Node
}

// plan checks that sel is the supported shape of a query over one private
// table (joined with public tables, possibly through derived tables and
// CTEs, which are inlined) and rewrites it. It runs the phases in order
// (doc.go); each refuses what it cannot plan.
func (a *Analyzer) plan(sel *pg_query.SelectStmt, refs []*relRef) (*Plan, error) {
	if sel != nil && sel.Op != pg_query.SetOperation_SETOP_NONE {
		return a.planUnion(sel, refs) // union.go
	}
	return a.planSelect(sel, refs, 0)
}

// planSelect plans one SELECT; its client parameters are $1..$n with n at
// least minParams (a UNION ALL branch binds all of the statement's).
func (a *Analyzer) planSelect(sel *pg_query.SelectStmt, refs []*relRef, minParams int) (*Plan, error) {
	var priv *relRef
	for _, r := range refs {
		if r.class == relPrivate {
			priv = r
			break
		}
	}
	name := priv.qualified()
	if sel == nil {
		return nil, reject(pgerr.FeatureNotSupported, priv.rv.Location, "private table %s may only be read by a SELECT", name)
	}
	if sel.Op != pg_query.SetOperation_SETOP_NONE {
		return nil, reject(pgerr.FeatureNotSupported, priv.rv.Location, "set operations (UNION, INTERSECT, EXCEPT) over private table %s are not supported: each branch would need its own budget", name)
	}
	orig := sel
	flat, err := a.flatten(sel) // inline.go
	if err != nil {
		return nil, err
	}
	sel = flat
	p, err := a.scope(orig, sel, priv) // scope.go
	if err != nil {
		return nil, err
	}
	p.tot.nparams = max(p.tot.nparams, minParams)
	if err := p.boundedWork(sel); err != nil { // work.go, joins.go
		return nil, err
	}
	if err := p.distinct(sel, name); err != nil {
		return nil, err
	}
	if err := p.shape(sel, name); err != nil {
		return nil, err
	}
	plan := &Plan{Table: p.table, MaxRows: p.table.MaxRowsPerUnit, Limit: -1}
	if err := p.groupBy(sel); err != nil { // keys.go
		return nil, err
	}
	if err := p.conditions(sel); err != nil { // predicates.go
		return nil, err
	}
	if len(sel.GroupClause) == 0 && !hasAggregate(sel.TargetList) {
		return nil, p.perRow(sel, name)
	}
	simple, err := p.outputs(sel, plan) // outputs.go
	if err != nil {
		return nil, err
	}
	if plan.Limit, err = limitValue(sel.LimitCount, "LIMIT", pgerr.InvalidRowCountInLimit, -1); err != nil {
		return nil, err
	}
	if plan.Offset, err = limitValue(sel.LimitOffset, "OFFSET", pgerr.InvalidRowCountInOffset, 0); err != nil {
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
		if err := p.post(orig, sel, plan); err != nil { // post.go
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
	for _, a := range p.aggs {
		plan.Aggregates = append(plan.Aggregates, a.agg)
	}
	plan.NumParams = max(numParams(orig), minParams)
	p.groupBounds(plan) // keys.go
	p.tot.apply()       // the checked WHERE and join conditions, constants hoisted
	if err := p.tot.finish(plan); err != nil {
		return nil, err
	}
	if err := p.layout(plan); err != nil { // layout.go
		return nil, err
	}
	if plan.SQL, err = p.sql(sel, plan); err != nil { // template.go
		return nil, err
	}
	for _, k := range p.keys {
		plan.GroupKeys = append(plan.GroupKeys, k.key)
	}
	return plan, nil
}

// shape refuses the clauses a private query may not have at all.
func (p *planner) shape(sel *pg_query.SelectStmt, name string) error {
	switch {
	case len(sel.DistinctClause) > 0:
		return reject(pgerr.FeatureNotSupported, -1, "SELECT DISTINCT over private table %s is not supported; use GROUP BY", name)
	case len(sel.WindowClause) > 0:
		return reject(pgerr.FeatureNotSupported, -1, "WINDOW clauses are not supported on private table %s", name)
	case sel.LimitOption == pg_query.LimitOption_LIMIT_OPTION_WITH_TIES:
		return reject(pgerr.FeatureNotSupported, -1, "FETCH ... WITH TIES is not supported on private table %s", name)
	case len(sel.TargetList) == 0:
		return reject(pgerr.FeatureNotSupported, -1, "a query over private table %s must select group keys or aggregates", name)
	}
	return p.noSystemColumns(sel)
}

// distinct plans SELECT DISTINCT (no GROUP BY, no aggregate) as GROUP BY
// every output, by position, which is what it means in PostgreSQL: the
// released rows are the key combinations that pass partition selection
// (or every public value), each once. sel is the planner's own copy
// (flatten clones it); the original keeps its DISTINCT for describe.
func (p *planner) distinct(sel *pg_query.SelectStmt, name string) error {
	if len(sel.DistinctClause) == 0 {
		return nil
	}
	if len(sel.DistinctClause) > 1 || sel.DistinctClause[0] != nil && sel.DistinctClause[0].GetNode() != nil {
		return reject(pgerr.FeatureNotSupported, -1, "SELECT DISTINCT ON over private table %s is not supported: it keeps one row per key, whose other columns are one person's values", name).
			WithHint("Use SELECT DISTINCT key (without ON) for the set of keys, or GROUP BY key with aggregates.")
	}
	if len(sel.GroupClause) > 0 || sel.HavingClause != nil || hasAggregate(sel.TargetList) {
		return reject(pgerr.FeatureNotSupported, -1, "SELECT DISTINCT with GROUP BY or aggregates over private table %s is not supported", name).
			WithHint("Drop DISTINCT: each group is released once.")
	}
	for i, t := range sel.TargetList {
		v := t.GetResTarget().GetVal()
		if cr := v.GetColumnRef(); cr != nil {
			if _, star := cr.Fields[len(cr.Fields)-1].GetNode().(*pg_query.Node_AStar); star {
				return reject(pgerr.FeatureNotSupported, cr.Location, "SELECT DISTINCT * over private table %s is not supported; name the columns whose values to list", name)
			}
		}
		if p.mentionsUnit(v) {
			return reject(pgerr.InsufficientPrivilege, -1, "SELECT DISTINCT %s is refused: listing values of the privacy unit %s would release who is in private table %s", describe(v), p.table.PrivacyUnit, name)
		}
		pos := &pg_query.A_Const{Val: &pg_query.A_Const_Ival{Ival: &pg_query.Integer{Ival: int32(i + 1)}}, Location: -1}
		sel.GroupClause = append(sel.GroupClause, &pg_query.Node{Node: &pg_query.Node_AConst{AConst: pos}})
	}
	sel.DistinctClause = nil
	return nil
}

// perRow is the refusal of a query without aggregates or GROUP BY, which
// would return one row per table row; a window function or a bad column
// reference in it is reported first.
func (p *planner) perRow(sel *pg_query.SelectStmt, name string) error {
	var werr error
	walk(sel.ProtoReflect(), func(m protoreflect.Message) bool {
		if fc, ok := m.Interface().(*pg_query.FuncCall); ok && fc.Over != nil && werr == nil {
			_, name := funcName(fc)
			werr = reject(pgerr.FeatureNotSupported, fc.Location, "window function %s(...) OVER is not supported on private tables", name)
		}
		return werr == nil
	})
	if werr != nil {
		return werr
	}
	for _, t := range sel.TargetList {
		if cr := t.GetResTarget().GetVal().GetColumnRef(); cr != nil {
			if _, err := p.column(cr); err != nil {
				return err
			}
		}
	}
	return reject(pgerr.InsufficientPrivilege, -1, "a query over private table %s without aggregates or GROUP BY would return one row per table row", name).
		WithHint("Select aggregates such as count(*), sum(col), avg(col).")
}

func asReject(err error, re **RejectError) bool {
	r, ok := err.(*RejectError)
	*re = r
	return ok
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
