package rewrite

import (
	"strconv"

	pg_query "github.com/pganalyze/pg_query_go/v5"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Phase outputs: the select list as group keys and aggregates, ORDER BY
// over them, LIMIT and OFFSET, released by the proxy without a
// post-processing query.

// outputs plans the select list and ORDER BY as group keys and
// aggregates, and reports whether that is the whole query (simple): with
// HAVING, or outputs or ORDER BY items that compute on aggregates, it
// plans nothing and the query is post-processed (post.go).
func (p *planner) outputs(sel *pg_query.SelectStmt, plan *Plan) (simple bool, err error) {
	simple = sel.HavingClause == nil && p.simpleTargets(sel)
	if simple {
		if err := p.targets(sel, plan); err != nil {
			return false, err
		}
		if err := p.orderBy(sel, plan); err != nil {
			var re *RejectError
			if !asReject(err, &re) || re.Code == pgerr.InsufficientPrivilege || re.Code == pgerr.UndefinedColumn {
				return false, err
			}
			simple = false
			plan.Outputs, plan.OrderBy = nil, nil
		}
	}
	return simple, nil
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
			plan.Outputs = append(plan.Outputs, Output{GroupKey: -1, Agg: agg, Name: outputName(rt)})
			continue
		}
		plan.Outputs = append(plan.Outputs, Output{GroupKey: p.keyFor(v), Name: outputName(rt)})
	}
	return nil
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
			return reject(pgerr.FeatureNotSupported, -1, "ORDER BY ... USING is not supported on private tables")
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
			return reject(pgerr.FeatureNotSupported, -1, "ORDER BY a group key is computed by post-processing")
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
			return 0, reject(pgerr.FeatureNotSupported, x.AConst.Location, "ORDER BY accepts output positions, output names or expressions")
		}
		if pos < 1 || pos > int64(len(plan.Outputs)) {
			return 0, reject(pgerr.InvalidColumnReference, x.AConst.Location, "ORDER BY position %d is not in select list", pos)
		}
		return int(pos - 1), nil
	case *pg_query.Node_ColumnRef:
		if f := x.ColumnRef.Fields; len(f) == 1 && f[0].GetString_() != nil {
			name := f[0].GetString_().GetSval()
			found := -1
			for i, t := range sel.TargetList {
				if outputName(t.GetResTarget()) == name {
					if found >= 0 {
						return 0, reject(pgerr.AmbiguousColumn, x.ColumnRef.Location, "ORDER BY %q is ambiguous", name)
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
			return 0, reject(pgerr.FeatureNotSupported, x.FuncCall.Location, "ORDER BY %s is not an output", describe(n))
		}
	}
	if k := p.keyFor(n); k >= 0 {
		for i, o := range plan.Outputs {
			if o.Agg == nil && o.GroupKey == k {
				return i, nil
			}
		}
	}
	return 0, reject(pgerr.FeatureNotSupported, -1, "ORDER BY %s is computed by post-processing", describe(n))
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

func limitValue(n *pg_query.Node, what string, code pgerr.Code, absent int64) (int64, error) {
	if n == nil {
		return absent, nil
	}
	c := n.GetAConst()
	if c != nil && c.Isnull {
		return absent, nil
	}
	if c == nil {
		return 0, reject(pgerr.FeatureNotSupported, -1, "%s must be an integer constant on private tables", what)
	}
	v, ok := intConst(c)
	if !ok {
		return 0, reject(pgerr.FeatureNotSupported, c.Location, "%s must be an integer constant on private tables", what)
	}
	if v < 0 {
		return 0, reject(code, c.Location, "%s must not be negative", what)
	}
	return v, nil
}
