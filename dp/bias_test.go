package dp_test

import (
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/dp"
	"github.com/dpproxy/dpproxy/internal/testconf"
	"github.com/dpproxy/dpproxy/rewrite"
)

// biasAnalyzer is newTestAnalyzer's rewriter with bias metadata on
// public.orders (as dpproxy bounds -write puts it): rows and region
// measured, channel and discount not.
func biasAnalyzer(t *testing.T) *rewrite.Analyzer {
	t.Helper()
	c := testconf.Get(testconf.Rewrite).
		Merge(`bias: {measured: dp, epsilon: 1, at: 2026-11-24, max_rows_per_unit: 8, rows_dropped: 0.359, max_groups_per_unit: 4, groups_dropped: {region: 0}}`, "tables", "public.orders").
		Set(`{lower: 0, upper: 500, bias: {lower: 0, upper: 500, sum_clamped: 0.0075}}`, "tables", "public.orders", "columns", "amount")
	cfg, err := c.Parse(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	rels, types := testconf.Catalog()
	relations := make(map[string]*rewrite.Relation, len(rels))
	for name, r := range rels {
		relations[name] = &rewrite.Relation{Columns: r.Columns, UniqueKeys: r.UniqueKeys}
	}
	return rewrite.New(cfg, rewrite.Options{Relations: relations, ColumnTypes: types, Database: "shop",
		NumericTypmods: map[string][2]int{"public.orders.amount": {10, 2}}})
}

func specOf(t *testing.T, a *rewrite.Analyzer, sql string) *dp.Spec {
	t.Helper()
	stmts, err := a.Analyze(sql)
	if err != nil {
		t.Fatal(err)
	}
	p, err := dp.NewPrivacy("laplace", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := dp.NewSpec(stmts[0].Plan, p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestBiasStated: the NOTICE's DETAIL and EXPLAIN DP state the bounds and
// the bias the metadata gives, and say which bias is unknown.
func TestBiasStated(t *testing.T) {
	a := biasAnalyzer(t)
	for _, c := range []struct {
		sql, detail, explain string
	}{
		{"SELECT count(*) FROM orders",
			"contribution bounds: ≤8 rows per customer_id; bias (measured with DP, ε=1, 2026-11-24; blind to a few heavy users): about 35.9% of the table's rows dropped",
			"Bias of the contribution bounds (measured with DP, ε=1, 2026-11-24; blind to a few heavy users): about 35.9% of the table's rows dropped"},
		{"SELECT region, sum(amount) FROM orders GROUP BY region",
			"contribution bounds: ≤8 rows per customer_id per group, ≤4 group(s) per customer_id, amount clamped to [0, 500]; bias (measured with DP, ε=1, 2026-11-24; blind to a few heavy users): at most 35.9% of the table's rows dropped by the rows bound (all groups together), 0.0% of (customer_id, group) pairs dropped by the groups bound, 0.8% of amount's sum changed by clamping",
			""},
		{"SELECT channel, avg(discount) FROM orders GROUP BY channel",
			"; bias (measured with DP, ε=1, 2026-11-24; blind to a few heavy users): at most 35.9% of the table's rows dropped by the rows bound (all groups together); unknown for groups dropped, discount clamping",
			""},
	} {
		s := specOf(t, a, c.sql)
		if got := s.BiasText(); !strings.HasSuffix(got, c.detail) && got != c.detail {
			t.Errorf("%s: detail\n %s\nwant (the end of)\n %s", c.sql, got, c.detail)
		}
		if c.explain == "" {
			continue
		}
		lines := s.ExplainSpec([]string{"count"})
		if len(lines) < 3 || lines[2] != c.explain {
			t.Errorf("%s: EXPLAIN DP\n %s\nwant its third line\n %s", c.sql, strings.Join(lines, "\n "), c.explain)
		}
	}
	// Without metadata: the bounds, and the bias unknown.
	s := specOf(t, newTestAnalyzer(t), "SELECT count(*) FROM orders")
	if got, want := s.BiasText(), "contribution bounds: ≤8 rows per customer_id; bias unknown (not measured: dpproxy bounds)"; got != want {
		t.Errorf("no metadata: %q, want %q", got, want)
	}
}
