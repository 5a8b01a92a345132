package rewrite

import (
	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Phase inline: CTEs and derived tables that read a private table are
// inlined into the outer query before any other check.

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
			return nil, reject(pgerr.FeatureNotSupported, w.Location, "WITH RECURSIVE over a private table is not supported")
		}
		for _, c := range w.Ctes {
			cte := c.GetCommonTableExpr()
			if len(cte.Aliascolnames) > 0 {
				return nil, reject(pgerr.FeatureNotSupported, cte.Location, "column names on CTE %s are not supported over a private table", cte.Ctename)
			}
			ctes[cte.Ctename] = cte
		}
		sel.WithClause = nil
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
				return nil, nil, reject(pgerr.FeatureNotSupported, rv.Location, "CTE %s is read twice: a private table may be read only once per query", rv.Relname)
			}
			used[rv.Relname] = true
			inner = cte.Ctequery.GetSelectStmt()
			alias, loc = rv.Relname, rv.Location
			if rv.Alias != nil {
				if len(rv.Alias.Colnames) > 0 {
					return nil, nil, reject(pgerr.FeatureNotSupported, rv.Location, "column aliases on CTE %s are not supported", rv.Relname)
				}
				alias = rv.Alias.Aliasname
			}
		case *pg_query.Node_RangeSubselect:
			rs := x.RangeSubselect
			if !a.readsPrivate(rs.Subquery) {
				return n, nil, nil
			}
			if rs.Lateral {
				return nil, nil, reject(pgerr.FeatureNotSupported, -1, "LATERAL subqueries over a private table are not supported")
			}
			inner = rs.Subquery.GetSelectStmt()
			if rs.Alias != nil {
				if len(rs.Alias.Colnames) > 0 {
					return nil, nil, reject(pgerr.FeatureNotSupported, -1, "column aliases on a derived table over a private table are not supported")
				}
				alias = rs.Alias.Aliasname
			}
		default:
			return n, nil, nil
		}
		if inner == nil {
			return nil, nil, reject(pgerr.FeatureNotSupported, loc, "a derived table over a private table must be a SELECT")
		}
		flat, err := a.flatten(inner)
		if err != nil {
			return nil, nil, err
		}
		if err := a.inlinable(flat, loc); err != nil {
			return nil, nil, err
		}
		qualifyColumns(flat)
		d := newDerived(flat, alias)
		var where []*pg_query.Node
		if flat.WhereClause != nil {
			where = append(where, flat.WhereClause)
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
	outer := outerNodes(sel)
	for _, n := range outer {
		replaceNodes(n, func(x *pg_query.Node) bool {
			switch v := x.Node.(type) {
			case *pg_query.Node_ColumnRef:
				if r, err := resolveDerived(ds, single, v.ColumnRef); err != nil {
					serr = err
				} else if r != nil {
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

// outerNodes are the parts of sel that may reference a derived table's
// columns: the select list, GROUP BY, ORDER BY, WHERE, HAVING and the join
// conditions of its FROM (not those inside a subquery).
func outerNodes(sel *pg_query.SelectStmt) []*pg_query.Node {
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
	return outer
}

// derived is an inlined derived table or CTE: its name in the outer query
// and the select-list expressions that replace the outer references to its
// columns.
type derived struct {
	alias string
	cols  map[string]*pg_query.Node
	star  *pg_query.Node // qualifier for names not listed (nil: none)
}

// newDerived reads the columns of a flattened derived table: each output
// by its name (nil when two share it: ambiguous), and for * the relation
// that qualifies the names not listed.
func newDerived(flat *pg_query.SelectStmt, alias string) *derived {
	d := &derived{alias: alias, cols: map[string]*pg_query.Node{}}
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
	return d
}

// resolveDerived returns what an outer column reference cr stands for in
// the inlined derived tables ds (single: the outer FROM is one of them
// alone), or nil when it is none of theirs.
func resolveDerived(ds []*derived, single bool, cr *pg_query.ColumnRef) (*pg_query.Node, error) {
	n := len(cr.Fields)
	if cr.Fields[n-1].GetAStar() != nil {
		return nil, nil
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
				return nil, reject(pgerr.AmbiguousColumn, cr.Location, "column reference %q is ambiguous", name)
			}
			return proto.Clone(v).(*pg_query.Node), nil
		}
		if d.star != nil {
			f := append([]*pg_query.Node{}, d.star.GetColumnRef().Fields...)
			return &pg_query.Node{Node: &pg_query.Node_ColumnRef{ColumnRef: &pg_query.ColumnRef{Fields: append(f, pg_query.MakeStrNode(name)), Location: cr.Location}}}, nil
		}
		if n == 2 {
			return nil, reject(pgerr.UndefinedColumn, cr.Location, "column %s.%s does not exist", d.alias, name)
		}
		return nil, nil
	}
	return nil, nil
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
			return nil, reject(pgerr.FeatureNotSupported, -1, "a derived table or CTE with WHERE on a side of this kind of join is not supported over a private table: write the join with the table itself")
		}
	}
	if len(on) == 0 {
		return up, nil
	}
	if len(j.UsingClause) > 0 || j.IsNatural || j.Quals == nil {
		return nil, reject(pgerr.FeatureNotSupported, -1, "a CTE or derived table with WHERE on the nullable side of an outer join needs an ON condition to hold its WHERE: write the join with ON instead of USING or NATURAL")
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
		return reject(pgerr.FeatureNotSupported, loc, "set operations in a derived table over a private table are not supported")
	case len(s.GroupClause) > 0 || s.HavingClause != nil || hasAggregate(s.TargetList):
		return reject(pgerr.FeatureNotSupported, loc, "a derived table or CTE that aggregates a private table (for example one row per person with count(*)) is not supported: "+
			"the outer aggregate would need bounds on those per-person values, which the configuration does not give; aggregate the table directly, e.g. count(*) / count(DISTINCT unit) for an average per person").
			WithHint("Per-person statistics need bounds: compute them as sum/count over the table, whose contributions are bounded.")
	case len(s.DistinctClause) > 0:
		return reject(pgerr.FeatureNotSupported, loc, "DISTINCT in a derived table over a private table is not supported")
	case s.LimitCount != nil || s.LimitOffset != nil:
		return reject(pgerr.FeatureNotSupported, loc, "LIMIT/OFFSET in a derived table over a private table is not supported: which rows it keeps would depend on other people's rows")
	case len(s.WindowClause) > 0:
		return reject(pgerr.FeatureNotSupported, loc, "window functions in a derived table over a private table are not supported")
	case len(s.FromClause) == 0:
		return reject(pgerr.FeatureNotSupported, loc, "a derived table over a private table needs a FROM clause")
	case len(s.ValuesLists) > 0:
		return reject(pgerr.FeatureNotSupported, loc, "VALUES in a derived table over a private table is not supported")
	}
	var err error
	for _, t := range s.TargetList {
		walk(t.ProtoReflect(), func(m protoreflect.Message) bool {
			if fc, ok := m.Interface().(*pg_query.FuncCall); ok && fc.Over != nil && err == nil {
				err = reject(pgerr.FeatureNotSupported, fc.Location, "window functions in a derived table over a private table are not supported")
			}
			return err == nil
		})
	}
	return err
}
