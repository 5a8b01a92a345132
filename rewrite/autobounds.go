package rewrite

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Columns with bounds: auto (conf.Column.AutoBounds): their clamping
// bounds are chosen at query time with DP (dp/approxbounds.go). The
// planner accepts such a column as the bare argument of SUM or AVG, one
// column per query, and prints two queries:
//
//   - Plan.Auto.SQL, the histogram: over the same rows, with the same
//     contribution bounds as the main query (a unit keeps at most
//     max_groups_per_unit groups, ranked by a seeded hash, and each of its
//     rows in a group counts least(1, R/n)), the count of the column's
//     values in each of 2×64 + 1 logarithmic buckets: always 129 rows,
//     bucket -64..64, whatever the rows hold, computed with total
//     expressions only (every value, NaN and ±Infinity included, falls in
//     a bucket; nothing can fail on a value);
//   - Plan.SQL, the main query, clamped to the widest bounds (±2^63) until
//     the proxy analyses the statement again with the chosen bounds
//     (Analyzer.WithAutoBounds), and Plan.WithAutoBounds takes that
//     analysis's SQL and bounds.

// AutoBounds is the bounds part of a plan.
type AutoBounds struct {
	// Column is the column's name, Key "schema.table.column" (the key of
	// Options.AutoBounds).
	Column, Key string
	// SQL is the histogram query; it takes the main query's parameters
	// (the client's, the constants and the seed).
	SQL string
	// Chosen is whether the bounds of the plan's aggregates are chosen
	// ones (Options.AutoBounds) rather than the widest.
	Chosen bool
}

// autoColumn is the planner's record of the column with bounds: auto.
type autoColumn struct {
	name string
	arg  *pg_query.Node
}

// autoWidest is the widest clamping bound of an auto column before its
// bounds are chosen: the edge of the histogram's largest bucket.
var autoWidest = math.Ldexp(1, 63)

// autoArg reports whether the argument of aggregate name is a column
// with bounds: auto, and refuses what is not supported with one: an
// aggregate other than SUM and AVG, arithmetic or any other expression
// over it, a second such column, a non-numeric column. COUNT needs no
// bounds, so it takes any argument as today.
func (p *planner) autoArg(name string, arg *pg_query.Node) (bool, error) {
	if name == "count" {
		return false, nil
	}
	var found *pg_query.ColumnRef
	walk(arg.ProtoReflect(), func(m protoreflect.Message) bool {
		if ref, ok := m.Interface().(*pg_query.ColumnRef); ok && found == nil {
			if c, err := p.column(ref); err == nil && c.private && p.table.Columns[c.name].AutoBounds() {
				found = ref
			}
		}
		return found == nil
	})
	if found == nil {
		return false, nil
	}
	c, _ := p.column(found)
	switch {
	case name != "sum" && name != "avg":
		return false, reject(pgerr.FeatureNotSupported, found.Location, "%s over column %s is not supported: its bounds are chosen at query time (bounds: auto), which SUM and AVG support", name, c.name).
			WithHint("Give the column lower and upper bounds in the configuration to use it in %s.", name)
	case arg.GetColumnRef() != found:
		return false, reject(pgerr.FeatureNotSupported, found.Location, "%s computes on column %s, whose bounds are chosen at query time (bounds: auto): only the bare column is supported as the argument of SUM or AVG", name, c.name).
			WithHint("Use %s(%s) itself, or give the column lower and upper bounds in the configuration to compute on it.", name, c.name)
	case !p.numericColumn(found, c):
		return false, reject(pgerr.FeatureNotSupported, found.Location, "%s(%s): column %s is not numeric, so it takes no clamping bounds", name, c.name, c.name)
	case p.auto != nil && p.auto.name != c.name:
		return false, reject(pgerr.FeatureNotSupported, found.Location, "%s(%s): at most one column with bounds: auto per query is supported, and %s is one already", name, c.name, p.auto.name)
	}
	if p.auto == nil {
		p.auto = &autoColumn{name: c.name, arg: arg}
	}
	return true, nil
}

// autoBounds are the auto column's bounds: chosen ones when the analyzer
// has them, the widest otherwise.
func (p *planner) autoBounds() (lo, hi float64, ok bool) {
	if b, ok := p.a.opts.AutoBounds[p.autoKey()]; ok {
		return b[0], b[1], true
	}
	return -autoWidest, autoWidest, true
}

func (p *planner) autoKey() string { return p.table.QualifiedName() + "." + p.auto.name }

// WithAutoBounds returns an Analyzer like a whose plans clamp the columns
// of bounds (keys "schema.table.column") to the bounds given.
func (a *Analyzer) WithAutoBounds(bounds map[string][2]float64) *Analyzer {
	b := *a
	b.opts.AutoBounds = bounds
	return &b
}

// autoBucketSQL is the histogram bucket of the value of col, -64..64
// (dp/approxbounds.go): 0 for 0; for v > 0, 1 + ⌈log2 v⌉ over v clamped
// to [1, 2^63], at most 64; the mirror image for v < 0; NULL for NULL.
// Total: the value is numeric (any numeric type casts to it without
// failing), NaN compares above every number and so counts as +2^63 as
// the main query's clamp counts it as its upper bound, ±Infinity clamp to
// ±2^63, and ln runs on a float8 in [1, 2^63].
func autoBucketSQL(col string) string {
	v := "(" + col + ")::numeric"
	mag := func(x string) string {
		return "least(64, 1 + ceil(ln(least(greatest(" + x + ", 1), 9223372036854775808)::float8) / ln(2::float8))::int)"
	}
	return "CASE WHEN " + v + " > 0 THEN " + mag(v) + " WHEN " + v + " < 0 THEN -" + mag("-"+v) + " WHEN " + v + " = 0 THEN 0 END"
}

// autoHistogram prints the histogram query of the plan's auto column
// (see the top of this file) into plan.Auto; nothing when there is none.
func (p *planner) autoHistogram(sel *pg_query.SelectStmt, plan *Plan) error {
	if p.auto == nil {
		return nil
	}
	unit, err := quoteIdent(p.table.PrivacyUnit)
	if err != nil {
		return err
	}
	if p.joined {
		q, err := quoteIdent(p.refName)
		if err != nil {
			return err
		}
		unit = q + "." + unit
	}
	from, err := p.fromSQL(sel.FromClause)
	if err != nil {
		return err
	}
	seed := "$" + strconv.Itoa(plan.SeedParam()) + "::bigint"
	t := &template{p: p, r: intLit(p.table.MaxRowsPerUnit), seed: seed}
	if err := t.perUnit(unit, sel.WhereClause); err != nil {
		return err
	}
	last := len(t.inner) - 1
	if last < 0 || t.inner[last] != "count(*) AS dp_n" {
		return fmt.Errorf("rewrite: the per-unit template changed; autobounds.go expects it to end with count(*) AS dp_n")
	}
	col, err := deparseExpr(p.auto.arg)
	if err != nil {
		return err
	}
	inner := append(append([]string(nil), t.inner[:last]...), autoBucketSQL(col)+" AS dp_b", "count(*) AS dp_c")
	ordinals := make([]string, len(inner)-1)
	for i := range ordinals {
		ordinals[i] = strconv.Itoa(i + 1)
	}
	part := strings.Join(append([]string{"dp_u"}, t.keyCols...), ", ")
	mid := []string{"dp_b", "dp_c", "sum(dp_c) OVER (PARTITION BY " + part + ") AS dp_n"}
	cond := "dp_b IS NOT NULL AND " + seed + " IS NOT NULL"
	if len(t.keyCols) > 0 {
		// As the main query (template.go, assemble): each unit keeps its
		// first max_groups_per_unit groups by a seeded hash, then by the
		// keys; dense_rank, as a group has a row per bucket.
		order := "hashtextextended(concat_ws('|', " + part + "), " + seed + "), " + strings.Join(t.keyCols, ", ")
		mid = append(mid, "dense_rank() OVER (PARTITION BY dp_u ORDER BY "+order+") AS dp_rank")
		cond = "dp_b IS NOT NULL AND dp_rank <= " + intLit(p.table.MaxGroupsPerUnit)
	}
	var b strings.Builder
	b.WriteString("SELECT dp_buckets.dp_b, coalesce(dp_hist.dp_h, 0) AS dp_h\n")
	b.WriteString("FROM generate_series(-" + strconv.Itoa(autoBucketsPerSign) + ", " + strconv.Itoa(autoBucketsPerSign) + ") AS dp_buckets(dp_b)\n")
	b.WriteString("LEFT JOIN (\n")
	b.WriteString("  SELECT dp_b, sum(dp_c * least(1, " + t.r + "::numeric / dp_n)) AS dp_h\n  FROM (\n")
	b.WriteString("    SELECT " + strings.Join(mid, ", ") + "\n    FROM (\n")
	b.WriteString("      SELECT " + strings.Join(inner, ", ") + "\n      FROM " + from + "\n")
	if len(t.where) > 0 {
		b.WriteString("      WHERE " + strings.Join(t.where, " AND ") + "\n")
	}
	b.WriteString("      GROUP BY " + strings.Join(ordinals, ", ") + "\n")
	b.WriteString("    ) AS dp_per_unit\n  ) AS dp_ranked\n")
	b.WriteString("  WHERE " + cond + "\n  GROUP BY dp_b\n")
	b.WriteString(") AS dp_hist ON dp_hist.dp_b = dp_buckets.dp_b\nORDER BY dp_buckets.dp_b")
	_, chosen := p.a.opts.AutoBounds[p.autoKey()]
	plan.Auto = &AutoBounds{Column: p.auto.name, Key: p.autoKey(), SQL: b.String(), Chosen: chosen}
	return nil
}

// autoBucketsPerSign is dp.AutoBucketsPerSign (dp imports rewrite).
const autoBucketsPerSign = 64

// WithAutoBounds returns a copy of p answered with the chosen bounds of
// its auto column: the SQL and the aggregates' bounds of chosen, the
// analysis of the same statement with them (Analyzer.WithAutoBounds),
// everything else (the public keys the proxy filled in, the outputs) as
// in p. The two must be the same plan but for the bounds.
func (p *Plan) WithAutoBounds(chosen *Plan) (*Plan, error) {
	if p.Auto == nil || chosen.Auto == nil || !chosen.Auto.Chosen || chosen.Auto.Key != p.Auto.Key ||
		len(chosen.Aggregates) != len(p.Aggregates) || chosen.SeedParam() != p.SeedParam() || chosen.DescribeSQL != p.DescribeSQL {
		return nil, fmt.Errorf("rewrite: the plan with chosen bounds differs from the plan")
	}
	out := *p
	out.SQL = chosen.SQL
	out.Auto = chosen.Auto
	out.Aggregates = make([]*Aggregate, len(p.Aggregates))
	byOld := make(map[*Aggregate]*Aggregate, len(p.Aggregates))
	for i, a := range p.Aggregates {
		c := chosen.Aggregates[i]
		if c.Kind != a.Kind || c.Text != a.Text || c.AutoBounds != a.AutoBounds {
			return nil, fmt.Errorf("rewrite: aggregate %d differs in the plan with chosen bounds", i)
		}
		cp := *a
		cp.Lower, cp.Upper = c.Lower, c.Upper
		out.Aggregates[i] = &cp
		byOld[a] = &cp
	}
	out.Outputs = make([]Output, len(p.Outputs))
	for i, o := range p.Outputs {
		if o.Agg != nil {
			o.Agg = byOld[o.Agg]
		}
		out.Outputs[i] = o
	}
	return &out, nil
}
