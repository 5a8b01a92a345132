package rewrite

import (
	"fmt"
	"strconv"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Phase template: the rewritten SQL (docs/design.md, "The rewrite
// template"), printed from the planned keys and aggregates and the result
// layout (layout.go), which it reads and never changes.

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
