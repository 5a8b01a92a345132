package rewrite

import (
	"fmt"
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
	if !chosen.Auto.Chosen || !strings.Contains(chosen.SQL, "least(greatest((score)::numeric, 0), 1024)") {
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
