package rewrite

import (
	"strconv"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Phase post-processing: outputs, HAVING and ORDER BY that compute on
// aggregates, run by the proxy over the released (noisy) values only.

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
	plan.Outputs = nil
	for i := range p.keys {
		plan.Outputs = append(plan.Outputs, Output{GroupKey: i})
	}
	for _, a := range p.aggs {
		plan.Outputs = append(plan.Outputs, Output{GroupKey: -1, Agg: a.agg})
	}
	if err := p.postDescribe(sel, plan); err != nil {
		return err
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
		s, err := p.released(t.GetResTarget().GetVal())
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
		if post.Where, err = p.released(sel.HavingClause); err != nil {
			return err
		}
	}
	if post.OrderBy, err = p.postOrderBy(orig, sel); err != nil {
		return err
	}
	plan.Post = post
	plan.OrderBy = nil
	return nil
}

// postDescribe sets DescribeSQL to the intermediate statement: the keys and
// aggregates, for their types.
func (p *planner) postDescribe(sel *pg_query.SelectStmt, plan *Plan) error {
	var err error
	mid := proto.Clone(sel).(*pg_query.SelectStmt)
	mid.TargetList, mid.GroupClause = nil, nil
	for _, k := range p.keys {
		mid.TargetList = append(mid.TargetList, pg_query.MakeResTargetNodeWithVal(proto.Clone(k.node).(*pg_query.Node), -1))
		mid.GroupClause = append(mid.GroupClause, proto.Clone(k.node).(*pg_query.Node))
	}
	for _, a := range p.aggs {
		tree, perr := pg_query.Parse("SELECT " + a.agg.Text)
		if perr != nil {
			return reject(pgerr.FeatureNotSupported, -1, "aggregate %s cannot be rewritten", a.agg.Text)
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
	return nil
}

// released prints an expression of the post-processing: its keys and
// aggregates replaced by the released columns (dp.dp_c<i>, in the order of
// Outputs), refusing anything else that reads the table.
func (p *planner) released(n *pg_query.Node) (string, error) {
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
				if a.agg == agg {
					x.Node = dpCol(len(p.keys) + i).Node
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
				err = reject(pgerr.InsufficientPrivilege, v.ColumnRef.Location, "column %s must appear in GROUP BY or be used in an aggregate: returning it would reveal individual rows of private table %s", r.name, p.table.QualifiedName())
			}
			return true
		case *pg_query.Node_FuncCall:
			schema, name := funcName(v.FuncCall)
			if (schema != "" && schema != "pg_catalog") || !postFuncs[name] || v.FuncCall.Over != nil {
				err = reject(pgerr.InsufficientPrivilege, v.FuncCall.Location, "function %s is not allowed on the results of a query over private table %s", name, p.table.QualifiedName())
				return true
			}
		case *pg_query.Node_AExpr:
			// Checked before it becomes a released column's: PostgreSQL
			// moves a HAVING condition on a key into WHERE when it plans
			// the original statement before the charge.
			if err = p.postPattern(v.AExpr); err != nil {
				return true
			}
		case *pg_query.Node_SubLink:
			err = reject(pgerr.FeatureNotSupported, v.SubLink.Location, "subqueries are not supported in queries over private table %s", p.table.QualifiedName())
			return true
		case *pg_query.Node_ParamRef:
			err = reject(pgerr.FeatureNotSupported, v.ParamRef.Location, "parameters are not supported in expressions over aggregates (HAVING, outputs) on private tables")
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
				err = reject(pgerr.InsufficientPrivilege, cr.Location, "an output of a query over private table %s may only compute on group keys and aggregates", p.table.QualifiedName())
			}
		}
		return err == nil
	})
	if err != nil {
		return "", err
	}
	return deparseExpr(c)
}

// dpCol is the released column i of the post-processing query.
func dpCol(i int) *pg_query.Node {
	return &pg_query.Node{Node: &pg_query.Node_ColumnRef{ColumnRef: &pg_query.ColumnRef{
		Fields: []*pg_query.Node{pg_query.MakeStrNode("dp"), pg_query.MakeStrNode("dp_c" + strconv.Itoa(i))}, Location: -1}}}
}

// postOrderBy prints the ORDER BY of the post-processing query: output
// positions and names as written, other expressions over the released
// columns.
func (p *planner) postOrderBy(orig, sel *pg_query.SelectStmt) (string, error) {
	var order []string
	for _, s := range sel.SortClause {
		sb := proto.Clone(s.GetSortBy()).(*pg_query.SortBy)
		if sb.SortbyDir == pg_query.SortByDir_SORTBY_USING {
			return "", reject(pgerr.FeatureNotSupported, -1, "ORDER BY ... USING is not supported on private tables")
		}
		keep := false
		switch x := sb.Node.GetNode().(type) {
		case *pg_query.Node_AConst:
			pos, ok := intConst(x.AConst)
			if !ok || pos < 1 || pos > int64(len(sel.TargetList)) {
				return "", reject(pgerr.InvalidColumnReference, x.AConst.Location, "ORDER BY position is not in select list")
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
			s, err := p.released(sb.Node)
			if err != nil {
				return "", err
			}
			tree, perr := pg_query.Parse("SELECT " + s)
			if perr != nil {
				return "", reject(pgerr.FeatureNotSupported, -1, "ORDER BY cannot be rewritten")
			}
			sb.Node = tree.Stmts[0].Stmt.GetSelectStmt().TargetList[0].GetResTarget().Val
		}
		q := &pg_query.SelectStmt{TargetList: []*pg_query.Node{pg_query.MakeResTargetNodeWithVal(pg_query.MakeAConstIntNode(1, -1), -1)},
			SortClause: []*pg_query.Node{{Node: &pg_query.Node_SortBy{SortBy: sb}}}, LimitOption: pg_query.LimitOption_LIMIT_OPTION_DEFAULT, Op: pg_query.SetOperation_SETOP_NONE}
		txt, err := deparseStmt(&pg_query.Node{Node: &pg_query.Node_SelectStmt{SelectStmt: q}})
		if err != nil {
			return "", err
		}
		o, ok := strings.CutPrefix(txt, "SELECT 1 ORDER BY ")
		if !ok {
			return "", reject(pgerr.FeatureNotSupported, -1, "ORDER BY cannot be rewritten")
		}
		order = append(order, o)
	}
	return strings.Join(order, ", "), nil
}
