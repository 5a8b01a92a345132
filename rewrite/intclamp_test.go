package rewrite

import (
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/conf"
)

// TestIntegerColumnsAreClampedNatively: SUM and AVG of an integer column
// clamp and sum without the numeric cast (exact, cheaper); everything else
// keeps it, including variance (its square must not overflow).
func TestIntegerColumnsAreClampedNatively(t *testing.T) {
	cfg, err := conf.Parse("t.yaml", []byte(`
upstream: postgres://x@127.0.0.1/db
auth: {method: trust, users: [{name: a, budget: {epsilon: 1, delta: 1.0e-6}}]}
tables:
  public.orders:
    privacy_unit: customer_id
    columns:
      quantity: {lower: 1, upper: 4}
      amount:   {lower: 0, upper: 500}
`), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	a := New(cfg, Options{IntegerColumns: map[string]bool{"public.orders.quantity": true}})
	plain := New(cfg, Options{})
	for _, c := range []struct {
		sql, want, notWant string
		an                 *Analyzer
	}{
		{"SELECT sum(quantity) FROM orders", "sum(CASE WHEN (quantity) > 4 THEN 4 WHEN (quantity) < 1 THEN 1 ELSE (quantity) END)", "(quantity)::numeric", a},
		{"SELECT avg(quantity) FROM orders", "sum(CASE WHEN (quantity) > 4 THEN 4 WHEN (quantity) < 1 THEN 1 ELSE (quantity) END)", "(quantity)::numeric", a},
		{"SELECT sum(amount) FROM orders", "(amount)::numeric", "", a},
		{"SELECT variance(quantity) FROM orders", "(quantity)::numeric", "(quantity) > 4", a},
		{"SELECT sum(quantity) FROM orders", "(quantity)::numeric", "", plain},
	} {
		stmts, err := c.an.Analyze(c.sql)
		if err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		got := stmts[0].Plan.SQL
		if !strings.Contains(got, c.want) || (c.notWant != "" && strings.Contains(got, c.notWant)) {
			t.Errorf("Analyze(%q).Plan.SQL =\n%s\nwant it to contain %q and not %q", c.sql, got, c.want, c.notWant)
		}
	}
}
