package rewrite

import (
	"fmt"
	pg_query "github.com/pganalyze/pg_query_go/v5"
	"math"
	"strings"
	"testing"
)

// renderAuto prints a plan's bounds part for the golden files.
func renderAuto(b *strings.Builder, p *Plan) {
	if p.Auto == nil {
		return
	}
	fmt.Fprintf(b, "-- auto bounds: column=%s key=%s chosen=%v\n%s\n", p.Auto.Column, p.Auto.Key, p.Auto.Chosen, p.Auto.SQL)
}

// TestAutoBoundsReplan: the statement analysed again with chosen bounds
// is the same plan but for the bounds in its SQL and aggregates, and
// WithAutoBounds grafts them onto the first plan (whose other fields
// the proxy may have filled in).
func TestAutoBoundsReplan(t *testing.T) {
	a := newTestAnalyzer(t)
	const q = "SELECT channel, avg(score), sum(score), count(*) FROM orders GROUP BY channel"
	first := analyzeOne(t, a, q)
	if first.Auto == nil || first.Auto.Chosen || first.Auto.Key != "public.orders.score" {
		t.Fatalf("Auto = %+v", first.Auto)
	}
	for _, ag := range first.Aggregates[:2] {
		if !ag.AutoBounds || ag.Lower != -math.Ldexp(1, 63) || ag.Upper != math.Ldexp(1, 63) {
			t.Errorf("before the choice: %+v, want the widest bounds", ag)
		}
	}
	chosen := analyzeOne(t, a.WithAutoBounds(map[string][2]float64{"public.orders.score": {0, 1024}}), q)
	if !chosen.Auto.Chosen || !strings.Contains(chosen.SQL, "CASE WHEN (score)::numeric > 1024 THEN 1024 WHEN (score)::numeric < 0 THEN 0 ELSE (score)::numeric END") {
		t.Fatalf("chosen plan: %+v\n%s", chosen.Auto, chosen.SQL)
	}
	got, err := first.WithAutoBounds(chosen)
	if err != nil {
		t.Fatal(err)
	}
	if got.SQL != chosen.SQL || got.Aggregates[0].Lower != 0 || got.Aggregates[1].Upper != 1024 || got.Aggregates[2].AutoBounds {
		t.Errorf("grafted plan: %+v", got.Aggregates)
	}
	if first.Aggregates[0].Upper != math.Ldexp(1, 63) {
		t.Error("WithAutoBounds changed the first plan")
	}
	for i, o := range got.Outputs {
		if o.Agg != nil && o.Agg != got.Aggregates[i-1] {
			t.Errorf("output %d points to an aggregate of another plan", i)
		}
	}
	other := analyzeOne(t, a.WithAutoBounds(map[string][2]float64{"public.orders.score": {0, 1024}}), "SELECT channel, avg(score) FROM orders GROUP BY channel")
	if _, err := first.WithAutoBounds(other); err == nil {
		t.Error("WithAutoBounds took the plan of another statement")
	}
	if _, err := first.WithAutoBounds(first); err == nil {
		t.Error("WithAutoBounds took a plan without chosen bounds")
	}
}

func analyzeOne(t *testing.T, a *Analyzer, q string) *Plan {
	t.Helper()
	sts, err := a.Analyze(q)
	if err != nil || len(sts) != 1 || sts[0].Plan == nil {
		t.Fatalf("Analyze(%q) = %v, %v", q, sts, err)
	}
	return sts[0].Plan
}

// TestAutoHistogramSQL: for every accepted golden case with a bounds:
// auto column, and a few more shapes (a join, a CTE, parameters,
// constants), the histogram query parses, reads the private table once,
// takes the seed parameter and no parameter the main query does not.
func TestAutoHistogramSQL(t *testing.T) {
	a := newTestAnalyzer(t)
	srcs := []string{
		"SELECT p.category, sum(o.score) FROM orders o JOIN products p ON p.product_id = o.product_id GROUP BY p.category",
		"WITH big AS (SELECT * FROM orders WHERE quantity > 2) SELECT avg(score) FROM big",
		"SELECT sum(score) FROM orders WHERE quantity > $1 AND region = upper('north')",
		"SELECT date_trunc('month', ordered_at), avg(score) FROM orders GROUP BY 1",
	}
	required := len(srcs)
	for _, f := range goldenCases(t) {
		srcs = append(srcs, f.SQL)
	}
	n := 0
	for i, src := range srcs {
		stmts, err := a.Analyze(src)
		if err != nil {
			if i < required {
				t.Errorf("Analyze(%q): %v", src, err)
			}
			continue
		}
		for _, st := range stmts {
			p := st.Plan
			if p == nil || p.Auto == nil {
				continue
			}
			n++
			tree, err := pg_query.Parse(p.Auto.SQL)
			if err != nil || len(tree.Stmts) != 1 {
				t.Fatalf("histogram of %q does not parse: %v\n%s", src, err, p.Auto.SQL)
			}
			private := 0
			for _, r := range collectRels(tree.Stmts[0].Stmt.ProtoReflect()) {
				if r.rv.Schemaname == p.Table.Schema && r.rv.Relname == p.Table.Name {
					private++
				}
			}
			if private != 1 {
				t.Errorf("histogram of %q reads %s %d times:\n%s", src, p.Table.QualifiedName(), private, p.Auto.SQL)
			}
			seed := fmt.Sprintf("$%d::bigint", p.SeedParam())
			if !strings.Contains(p.Auto.SQL, seed) {
				t.Errorf("histogram of %q does not take the seed %s:\n%s", src, seed, p.Auto.SQL)
			}
			if strings.Contains(p.Auto.SQL, fmt.Sprintf("$%d", p.SeedParam()+1)) {
				t.Errorf("histogram of %q takes a parameter beyond the seed:\n%s", src, p.Auto.SQL)
			}
		}
	}
	if n < 7 {
		t.Errorf("only %d plans with bounds: auto, want at least 7", n)
	}
}
