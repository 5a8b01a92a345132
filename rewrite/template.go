package rewrite

import (
	"fmt"
	"strconv"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dpproxy/dpproxy/internal/pgerr"
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
		return "", reject(pgerr.FeatureNotSupported, -1, "FROM clause cannot be rewritten")
	}
	return out, nil
}

// sql writes the rewritten query (docs/design.md, "The rewrite template"),
// each part of the result in the column the layout gave it (layout.go).
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
	t := &template{p: p, r: intLit(p.table.MaxRowsPerUnit), seed: "$" + strconv.Itoa(plan.SeedParam()) + "::bigint"}
	for _, a := range p.aggs {
		if a.agg.Kind == AggCountDistinct {
			t.distinct, t.distinctFilter = a.arg, a.filter
		}
	}
	if err := t.perUnit(unit, sel.WhereClause); err != nil {
		return "", err
	}
	// outer is the result, one column per index of the layout.
	t.outer = make([]string, p.width)
	copy(t.outer, t.keyCols)
	if t.distinct != nil {
		t.outer[plan.UnitsCol] = "count(DISTINCT dp_u) AS dp_units"
	} else {
		t.outer[plan.UnitsCol] = "count(*) AS dp_units"
	}
	for i, pa := range p.aggs {
		if pa.agg.Derived() {
			continue // derive.go: no columns of its own
		}
		if err := t.aggregate(i, pa); err != nil {
			return "", err
		}
	}
	for col, c := range t.outer {
		if c == "" {
			return "", fmt.Errorf("rewrite: result column %d has no part (layout.go and template.go disagree)", col)
		}
	}
	if len(t.quantiles) == 0 {
		return t.assemble(from), nil
	}
	return t.withHistograms(from) // histogram.go
}

// template is the rewritten query while it is printed: the lists of its
// levels, the per-unit pre-aggregation (inner), the ranking of each
// unit's groups (assemble) and the result (outer).
type template struct {
	p    *planner
	r    string // max_rows_per_unit, as a literal
	seed string // the seed parameter, as $n::bigint
	// distinct is the argument of count(DISTINCT col), distinctFilter its
	// FILTER; nil when there is none.
	distinct, distinctFilter *pg_query.Node
	keyCols                  []string // g0, g1, ...
	inner, innerGroup, where []string
	perUnits                 []string // per-unit components carried to the outer query
	outer                    []string
	quantiles                []int // indexes in p.aggs of the quantiles
}

// perUnit starts the per-unit pre-aggregation: the unit, the keys and
// the unit's number of rows, grouped by unit and keys, over the rows that
// pass WHERE and whose keys are among their public values.
func (t *template) perUnit(unit string, whereClause *pg_query.Node) error {
	t.keyCols = make([]string, len(t.p.keys))
	t.inner = append(t.inner, unit+" AS dp_u")
	t.innerGroup = append(t.innerGroup, unit)
	if whereClause != nil {
		w, err := parenExpr(whereClause)
		if err != nil {
			return err
		}
		t.where = append(t.where, w)
	}
	for i, k := range t.p.keys {
		e := k.key.Expr
		t.keyCols[i] = "g" + strconv.Itoa(k.key.ResultCol)
		// Grouped by the key's text, bytewise (keyText), unless its type's
		// equality is already text identity: the text released is then
		// the group itself, never one row's spelling of a value its type
		// holds equal to others.
		if !t.p.textIsEquality(k) {
			e = keyText(e)
		}
		t.inner = append(t.inner, e+" AS "+t.keyCols[i])
		t.innerGroup = append(t.innerGroup, e)
		if pv := k.key.PublicValues; pv != nil {
			lits := make([]string, len(pv))
			for j, v := range pv {
				lits[j] = quoteLiteral(t.p.filterText(k, v))
			}
			t.where = append(t.where, e+"::text IN ("+strings.Join(lits, ", ")+")")
		}
	}
	// dp_n is the unit's number of rows in the group; in the distinct
	// template the innermost rows are per value (dp_nv), and dp_n is their
	// window sum per (unit, group).
	if t.distinct != nil {
		e, err := parenExpr(t.distinct)
		if err != nil {
			return err
		}
		t.inner = append(t.inner, e+" AS dp_v", "count(*) AS dp_nv")
		t.innerGroup = append(t.innerGroup, e)
		if t.distinctFilter != nil {
			f, err := deparseExpr(t.distinctFilter)
			if err != nil {
				return err
			}
			t.inner = append(t.inner, "count(*) FILTER (WHERE "+f+") AS dp_vf")
		}
	} else {
		t.inner = append(t.inner, "count(*) AS dp_n")
	}
	return nil
}

// put prints an aggregate's part in its result column.
func (t *template) put(col int, expr string) {
	t.outer[col] = fmt.Sprintf("%s AS a%d", expr, col-len(t.p.keys)-1)
}

// scaled is the sum over units of a per-unit component, each unit's
// scaled down to at most max_rows_per_unit of its rows. Most units have no
// more rows than that in a group: their component is taken as it is, and
// only the others pay the numeric division (the same values as
// c * least(1, r::numeric / dp_n), which divided for every unit: LEAST
// keeps its first argument on a tie, so a unit with exactly r rows is
// multiplied by 1 there too).
func (t *template) scaled(c string) string {
	return "sum(CASE WHEN dp_n <= " + t.r + " THEN " + c + " ELSE " + c + " * (" + t.r + "::numeric / dp_n) END)"
}

// aggregate prints the i-th aggregate: its per-unit components and its
// parts of the result.
func (t *template) aggregate(i int, pa plannedAgg) error {
	agg := pa.agg
	r, distinct, scaled := t.r, t.distinct, t.scaled
	var col string
	if arg := pa.arg; arg != nil {
		var err error
		if col, err = deparseExpr(arg); err != nil {
			return err
		}
	}
	filter := ""
	if f := pa.filter; f != nil {
		fs, err := deparseExpr(f)
		if err != nil {
			return err
		}
		filter = " FILTER (WHERE " + fs + ")"
	}
	s, c, q := "s"+strconv.Itoa(i), "c"+strconv.Itoa(i), "q"+strconv.Itoa(i)
	// v is the clamped argument as numeric; vSum may skip the cast for
	// an integer column (SUM and AVG only: variance squares and
	// quantiles bucket the value, which must not overflow or change
	// type).
	v := clampSQL("("+col+")::numeric", agg.Lower, agg.Upper)
	vSum := clampSQL("("+col+")"+t.p.clampCast(pa.arg), agg.Lower, agg.Upper)
	switch agg.Kind {
	case AggCount:
		switch {
		case pa.arg == nil && filter == "" && distinct == nil:
			t.put(agg.CountCol, "sum(least(dp_n, "+r+"))")
		case pa.arg == nil:
			t.inner = append(t.inner, "count(*)"+filter+" AS "+c)
			t.perUnits = append(t.perUnits, c)
			t.put(agg.CountCol, scaled(c))
		default:
			t.inner = append(t.inner, "count("+col+")"+filter+" AS "+c)
			t.perUnits = append(t.perUnits, c)
			t.put(agg.CountCol, scaled(c))
		}
	case AggCountDistinctUnit:
		switch {
		case filter != "":
			t.inner = append(t.inner, "count(*)"+filter+" AS "+c)
			t.perUnits = append(t.perUnits, c)
			t.put(agg.CountCol, "count(DISTINCT dp_u) FILTER (WHERE "+c+" > 0)")
		case distinct != nil:
			t.put(agg.CountCol, "count(DISTINCT dp_u)")
		default:
			t.put(agg.CountCol, "count(dp_u)")
		}
	case AggCountDistinct:
		cond := "dp_v IS NOT NULL AND dp_vrank <= " + intLit(agg.MaxDistinct)
		if filter != "" {
			cond += " AND dp_vf > 0"
		}
		t.put(agg.CountCol, "count(DISTINCT dp_v) FILTER (WHERE "+cond+")")
	case AggSum:
		t.inner = append(t.inner, "sum("+vSum+")"+filter+" AS "+s)
		t.perUnits = append(t.perUnits, s)
		t.put(agg.SumCol, scaled(s))
	case AggAvg:
		t.inner = append(t.inner, "sum("+vSum+")"+filter+" AS "+s)
		t.perUnits = append(t.perUnits, s)
		t.put(agg.SumCol, scaled(s))
		if agg.SharedCount == nil { // else the COUNT's column (derive.go)
			t.inner = append(t.inner, "count("+col+")"+filter+" AS "+c)
			t.perUnits = append(t.perUnits, c)
			t.put(agg.CountCol, scaled(c))
		}
	case AggVariance:
		mid := numLit((agg.Lower + agg.Upper) / 2)
		d := "(" + v + " - " + mid + ")"
		if agg.SharedCount == nil { // else the COUNT's column (derive.go)
			t.inner = append(t.inner, "count("+col+")"+filter+" AS "+c)
			t.perUnits = append(t.perUnits, c)
			t.put(agg.CountCol, scaled(c))
		}
		t.inner = append(t.inner, "sum"+d+filter+" AS "+s, "sum("+d+" * "+d+")"+filter+" AS "+q)
		t.perUnits = append(t.perUnits, s, q)
		t.put(agg.SumCol, scaled(s))
		t.put(agg.SumSqCol, scaled(q))
	case AggQuantile:
		// The groups' rows have no histogram: its buckets come in rows of
		// their own, merged into the group's row (histogram.go).
		t.put(agg.HistCol, "NULL::numeric")
		t.quantiles = append(t.quantiles, i)
	}
	return nil
}

// assemble prints the levels into one query: the result over the ranked
// per-unit rows, of which each unit keeps its first max_groups_per_unit
// groups (and, for COUNT(DISTINCT), values); without keys or distinct
// values, the result directly over the per-unit rows.
func (t *template) assemble(from string) string {
	p, seed, keyCols, distinct, distinctFilter := t.p, t.seed, t.keyCols, t.distinct, t.distinctFilter
	var b strings.Builder
	nested := len(p.keys) > 0 || distinct != nil
	indent := "  "
	if nested {
		indent = "    "
	}
	innerSQL := indent + "SELECT " + strings.Join(t.inner, ", ") + "\n" + indent + "FROM " + from + "\n"
	if len(t.where) > 0 {
		innerSQL += indent + "WHERE " + strings.Join(t.where, " AND ") + "\n"
	}
	innerSQL += indent + "GROUP BY " + strings.Join(t.innerGroup, ", ") + "\n"

	b.WriteString("SELECT " + strings.Join(t.outer, ", ") + "\nFROM (\n")
	if !nested || (distinct == nil && t.keysCapGroups()) {
		if nested {
			innerSQL = strings.ReplaceAll(innerSQL, "\n    ", "\n  ")[2:]
		}
		b.WriteString(innerSQL)
		b.WriteString(") AS dp_per_unit\n")
		// Without GROUP BY each unit touches one group, and with public
		// values that allow no more than max_groups_per_unit groups it
		// touches no more than that: no group is sampled. The seed is
		// still referenced so that every plan takes exactly SeedParam()
		// parameters.
		b.WriteString("WHERE " + seed + " IS NOT NULL")
		if nested {
			b.WriteString("\nGROUP BY " + strings.Join(keyCols, ", "))
		}
		return b.String()
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
	hashOf := t.hashOf
	hashArgs := append([]string{"dp_u"}, keyCols...)
	hash := t.groupOrder() // the histograms' rows rank groups by the same order
	if distinct != nil {
		part := strings.Join(append([]string{"dp_u"}, keyCols...), ", ")
		mid = append(mid, "dp_v", "dp_nv")
		if distinctFilter != nil {
			mid = append(mid, "dp_vf")
		}
		mid = append(mid, t.perUnits...)
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
		mid = append(mid, t.perUnits...)
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
	return b.String()
}

// filterText is the text of public value v (as released: the type's
// output) that the per-unit WHERE compares key k's (e)::text with. The
// two differ for a boolean grouped natively, whose cast to text is "true"
// where its output is "t" (boolPublicValues spells its values "t"/"f").
func (p *planner) filterText(k plannedKey, v string) string {
	if ref := k.node.GetColumnRef(); ref != nil && k.col != nil && p.textIsEquality(k) {
		if typ, err := p.columnType(ref, k.col); err == nil && typ == "bool" {
			return map[string]string{"t": "true", "f": "false"}[v]
		}
	}
	return v
}

// keysCapGroups reports whether the keys' configured public values allow
// at most max_groups_per_unit groups, so that ranking a unit's groups to
// keep that many would keep them all. The per-unit rows keep only keys
// whose text is among the public values (perUnit), and each key is
// grouped by its text or by an equality that is text identity, so a
// unit's distinct groups are distinct combinations of public values:
// their number is at most the product of the lists' lengths.
func (t *template) keysCapGroups() bool {
	combos := int64(1)
	for _, k := range t.p.keys {
		n := int64(len(k.key.PublicValues))
		if k.key.PublicTable != "" || n == 0 || combos > t.p.table.MaxGroupsPerUnit/n {
			return false
		}
		combos *= n
	}
	return combos <= t.p.table.MaxGroupsPerUnit
}

// keyText is a group key's expression as the rewritten query groups it:
// its text, compared bytewise. PostgreSQL groups by the type's equality,
// which for some types holds values with different texts equal (numeric
// 1.0 and 1.00, float8 -0 and 0, interval '1 day' and '24:00:00', citext,
// a nondeterministic collation) and returns the first row's text for the
// group: which person's row that is depends on the data, so one person's
// spelling could be the key released for a group of thousands (red team,
// issue 16: TestGroupKeyTextIsTheGroup). Grouped by the text, each
// spelling is a group of its own, released or not by partition selection
// or the public values on its own units. The result's bytes are the same
// as the column's (its text form; the proxy describes the original
// statement's types).
//
// The text is the type's output function's (format's %s), which is what
// PostgreSQL sends for the column: a cast to text is not (true and 'true',
// char(n)'s padding, inet's netmask). NULL stays NULL.
func keyText(e string) string {
	return "(CASE WHEN (" + e + ") IS NULL THEN NULL ELSE format('%s', " + e + ") COLLATE \"C\" END)"
}

// textIdentityTypes are the column types (Options.ColumnTypes' internal
// names) whose equality is identity of their text in a session: a key
// that is a plain column of one is grouped natively (keyText would
// change nothing but the cost). Not numeric (1.0 = 1.00), float (-0 = 0),
// interval, bpchar without a length ('a' = 'a '), citext, nor a string
// type with a nondeterministic collation (whose type name says so).
var textIdentityTypes = map[string]bool{
	"int2": true, "int4": true, "int8": true, "text": true, "varchar": true,
	"date": true, "timestamp": true, "timestamptz": true, "bool": true, "uuid": true,
}

// textIsEquality reports whether key k is a plain column of a type in
// textIdentityTypes, or mentions no column at all: a constant (hoisted,
// so a literal or a parameter here) is one value for every row, one
// group whose text is its own, and wrapping it in keyText would leave a
// constant expression in the rewritten SQL for PostgreSQL to evaluate per
// row (the totality invariant, FuzzRewrite).
func (p *planner) textIsEquality(k plannedKey) bool {
	if !p.mentionsColumn(k.node) {
		return true
	}
	ref := k.node.GetColumnRef()
	if k.col == nil || ref == nil {
		return false
	}
	typ, err := p.columnType(ref, k.col)
	return err == nil && textIdentityTypes[typ]
}
