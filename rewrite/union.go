package rewrite

import (
	"strconv"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/proto"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// A UNION ALL of DP queries (Grafana's filter-value API sends one of
// SELECT DISTINCT subqueries): each branch is planned as a private query
// of its own (Plan.Branches); the proxy charges the sum of their costs in
// one charge before any branch runs, releases each branch on its own and
// concatenates the rows. The post-processing query (Plan.Post) reads them
// as the union's column types and applies ORDER BY, LIMIT and OFFSET over
// the whole union to the released rows only.

// planUnion plans a set operation over a private table.
func (a *Analyzer) planUnion(sel *pg_query.SelectStmt, refs []*relRef) (*Plan, error) {
	var priv *relRef
	for _, r := range refs {
		if r.class == relPrivate {
			priv = r
			break
		}
	}
	name := priv.qualified()
	if sel.Op != pg_query.SetOperation_SETOP_UNION || !sel.All {
		return nil, reject(pgerr.FeatureNotSupported, priv.rv.Location, "%s over private table %s is not supported: it compares rows of the branches, which are noisy answers of their own", setOpName(sel), name).
			WithHint("Use UNION ALL: each branch is answered as a DP query of its own and the charge is the sum of theirs.")
	}
	if sel.WithClause != nil {
		return nil, reject(pgerr.FeatureNotSupported, priv.rv.Location, "WITH over a UNION ALL that reads private table %s is not supported", name).
			WithHint("Put the WITH inside each branch that uses it.")
	}
	var leaves []*pg_query.SelectStmt
	var collect func(s *pg_query.SelectStmt)
	collect = func(s *pg_query.SelectStmt) {
		if s.Op == pg_query.SetOperation_SETOP_UNION && s.All && s.WithClause == nil &&
			len(s.SortClause) == 0 && s.LimitCount == nil && s.LimitOffset == nil {
			collect(s.Larg)
			collect(s.Rarg)
			return
		}
		leaves = append(leaves, s)
	}
	collect(sel.Larg)
	collect(sel.Rarg)
	nparams := numParams(sel)
	plan := &Plan{Table: priv.table, NumParams: nparams, Limit: -1}
	for i, leaf := range leaves {
		in := map[*pg_query.RangeVar]bool{}
		for _, r := range collectRels(leaf.ProtoReflect()) {
			in[r.rv] = true
		}
		var lrefs []*relRef
		for _, r := range refs {
			if in[r.rv] {
				lrefs = append(lrefs, r)
			}
		}
		if !hasPrivate(lrefs) {
			return nil, reject(pgerr.FeatureNotSupported, priv.rv.Location, "branch %d of this UNION ALL reads no private table: a UNION ALL over private table %s may only join DP queries", i+1, name).
				WithHint("Run that branch as a query of its own.")
		}
		if leaf.Op != pg_query.SetOperation_SETOP_NONE {
			return nil, a.planUnionErr(leaf, lrefs)
		}
		b, err := a.planSelect(leaf, lrefs, nparams)
		if err != nil {
			return nil, err
		}
		plan.Branches = append(plan.Branches, b)
	}
	var targets []string
	for i, t := range leaves[0].TargetList {
		// PostgreSQL names a union's columns after its first branch.
		out := outputName(t.GetResTarget())
		plan.Outputs = append(plan.Outputs, Output{GroupKey: -1, Name: out})
		q, err := quoteIdent(out)
		if err != nil {
			return nil, err
		}
		targets = append(targets, "dp.dp_c"+strconv.Itoa(i)+" AS "+q)
	}
	on := &pg_query.Node{Node: &pg_query.Node_SelectStmt{SelectStmt: sel}}
	var err error
	if plan.DescribeSQL, err = deparseStmt(on); err != nil {
		return nil, err
	}
	if err := faithful(on, plan.DescribeSQL); err != nil {
		return nil, err
	}
	// The post-processing query reads the concatenated released rows as
	// the union's described types, so that each value is printed as
	// PostgreSQL prints the union's column (a bigint branch under a
	// numeric column, a date under a timestamp), then applies ORDER BY,
	// LIMIT and OFFSET. It reads no private row.
	if sel.LimitOption == pg_query.LimitOption_LIMIT_OPTION_WITH_TIES {
		return nil, reject(pgerr.FeatureNotSupported, -1, "FETCH ... WITH TIES is not supported on private table %s", name)
	}
	if plan.Limit, err = limitValue(sel.LimitCount, "LIMIT", pgerr.InvalidRowCountInLimit, -1); err != nil {
		return nil, err
	}
	if plan.Offset, err = limitValue(sel.LimitOffset, "OFFSET", pgerr.InvalidRowCountInOffset, 0); err != nil {
		return nil, err
	}
	post := &Post{Targets: strings.Join(targets, ", ")}
	if post.OrderBy, err = unionOrderBy(sel, plan.Outputs); err != nil {
		return nil, err
	}
	plan.Post = post
	plan.OriginalSQL = plan.DescribeSQL
	return plan, nil
}

// planUnionErr is the refusal of a branch that is itself a set operation
// other than a plain UNION ALL.
func (a *Analyzer) planUnionErr(s *pg_query.SelectStmt, refs []*relRef) error {
	if s.Op == pg_query.SetOperation_SETOP_UNION && s.All {
		return reject(pgerr.FeatureNotSupported, -1, "a parenthesized UNION ALL with its own WITH, ORDER BY or LIMIT inside a UNION ALL over a private table is not supported").
			WithHint("Remove the parentheses, or run the inner UNION ALL as a query of its own.")
	}
	_, err := a.planUnion(s, refs)
	return err
}

// unionOrderBy prints the ORDER BY of a union for the post-processing
// query, whose select list names the union's columns: only output
// positions and output names (what PostgreSQL accepts there too).
func unionOrderBy(sel *pg_query.SelectStmt, outs []Output) (string, error) {
	var order []string
	for _, s := range sel.SortClause {
		sb := proto.Clone(s.GetSortBy()).(*pg_query.SortBy)
		if sb.SortbyDir == pg_query.SortByDir_SORTBY_USING {
			return "", reject(pgerr.FeatureNotSupported, -1, "ORDER BY ... USING is not supported on private tables")
		}
		ok := false
		switch x := sb.Node.GetNode().(type) {
		case *pg_query.Node_AConst:
			pos, isInt := intConst(x.AConst)
			if !isInt || pos < 1 || pos > int64(len(outs)) {
				return "", reject(pgerr.InvalidColumnReference, x.AConst.Location, "ORDER BY position is not in select list")
			}
			ok = true
		case *pg_query.Node_ColumnRef:
			if f := x.ColumnRef.Fields; len(f) == 1 && f[0].GetString_() != nil {
				for _, o := range outs {
					ok = ok || o.Name == f[0].GetString_().GetSval()
				}
			}
		}
		if !ok {
			return "", reject(pgerr.FeatureNotSupported, -1, "ORDER BY %s over a UNION ALL of DP queries is not supported: order by an output column's position or name", describe(sb.Node))
		}
		q := &pg_query.SelectStmt{TargetList: []*pg_query.Node{pg_query.MakeResTargetNodeWithVal(pg_query.MakeAConstIntNode(1, -1), -1)},
			SortClause: []*pg_query.Node{{Node: &pg_query.Node_SortBy{SortBy: sb}}}, LimitOption: pg_query.LimitOption_LIMIT_OPTION_DEFAULT, Op: pg_query.SetOperation_SETOP_NONE}
		txt, err := deparseStmt(&pg_query.Node{Node: &pg_query.Node_SelectStmt{SelectStmt: q}})
		if err != nil {
			return "", err
		}
		o, cut := strings.CutPrefix(txt, "SELECT 1 ORDER BY ")
		if !cut {
			return "", reject(pgerr.FeatureNotSupported, -1, "ORDER BY cannot be rewritten")
		}
		order = append(order, o)
	}
	return strings.Join(order, ", "), nil
}

// setOpName names a set operation for messages.
func setOpName(s *pg_query.SelectStmt) string {
	name := "UNION"
	switch s.Op {
	case pg_query.SetOperation_SETOP_INTERSECT:
		name = "INTERSECT"
	case pg_query.SetOperation_SETOP_EXCEPT:
		name = "EXCEPT"
	}
	if s.All {
		name += " ALL"
	}
	return name
}
