package e2e

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/bounds"
	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/conf"
)

// boundsConfig is the demo's orders table with the demo's old bounds
// (8 rows, 4 groups per customer), which drop about a third of the rows.
const boundsConfig = `upstream: UPSTREAM
auth:
  method: trust
  users:
    - {name: bounds_analyst, budget: {epsilon: 1, delta: 1.0e-6}}
tables:
  # the demo's orders
  public.orders:
    privacy_unit: customer_id
    max_groups_per_unit: 4
    max_rows_per_unit: 8   # too small for half the customers
    columns:
      amount: {lower: 0, upper: 500}
      region: {public_values: [north, south, east, west]}
  public.products: {public: true}
`

// operatorCharges is the number and total ε of the ledger's charges by
// dpproxy bounds.
func operatorCharges(t *testing.T) (int, float64) {
	t.Helper()
	var n int
	var eps float64
	err := direct(t).QueryRow(ctx, `SELECT count(*), coalesce(sum(epsilon), 0)::float8 FROM dpproxy.charges
		WHERE analyst = $1 AND actor = $2 AND action = 'charge'`, budget.OperatorSubject, bounds.Actor).Scan(&n, &eps)
	if err != nil {
		t.Fatal(err)
	}
	return n, eps
}

// trueRowsDropped is the exact share of orders beyond r per customer.
func trueRowsDropped(t *testing.T, r int) float64 {
	t.Helper()
	var s float64
	err := direct(t).QueryRow(ctx, `SELECT (sum(greatest(n - $1, 0))::float8 / sum(n)) FROM
		(SELECT count(*) AS n FROM orders GROUP BY customer_id) s`, r).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func rowAt(rows []bounds.Row, b float64) (bounds.Row, bool) {
	for _, r := range rows {
		if r.Bound == b {
			return r, true
		}
	}
	return bounds.Row{}, false
}

// TestBoundsDP runs dpproxy bounds in DP mode on the demo data: the
// operator's ε is in the ledger, and the proposal keeps more rows than
// the demo's old max_rows_per_unit of 8, with the bias it states.
func TestBoundsDP(t *testing.T) {
	cfg := configFor(t, boundsConfig, nil)
	n0, eps0 := operatorCharges(t)
	var out bytes.Buffer
	props, err := bounds.Run(ctx, cfg, bounds.Options{Table: "orders", Epsilon: 1}, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	n1, eps1 := operatorCharges(t)
	if n1 != n0+1 || math.Abs(eps1-eps0-1) > 1e-9 {
		t.Errorf("ledger: %d operator charges of ε=%v, then %d of ε=%v; want one more of ε=1", n0, eps0, n1, eps1)
	}
	if !strings.Contains(out.String(), "DP measurement: ε=1") || strings.Contains(out.String(), "WARNING") {
		t.Errorf("output does not say it is a DP measurement:\n%s", out.String())
	}
	if len(props) != 1 {
		t.Fatalf("%d proposals, want 1 (orders)", len(props))
	}
	p := props[0]
	at8, ok := rowAt(p.RowsTrade, 8)
	if !ok {
		t.Fatal("no trade-off row for the current bound 8")
	}
	// DP cannot see what a few units do: the 8 customers with 300 orders
	// (12% of the rows) fall in bins under the noise floor, so the
	// measured share misses up to their part.
	truth := trueRowsDropped(t, 8)
	if at8.DroppedShare < truth-0.13 || at8.DroppedShare > truth+0.03 {
		t.Errorf("rows dropped at 8: measured %.3f, true %.3f", at8.DroppedShare, truth)
	}
	if p.MaxRows.Bound <= 8 || p.MaxRows.DroppedShare >= at8.DroppedShare {
		t.Errorf("proposed max_rows_per_unit %v dropping %.3f, want above 8 and dropping less than 8's %.3f", p.MaxRows.Bound, p.MaxRows.DroppedShare, at8.DroppedShare)
	}
	// The truth at the proposal is no worse than the stated share plus
	// what DP cannot see (a few heavy customers: 8 of 2000 order 300 times).
	if tr := trueRowsDropped(t, int(p.MaxRows.Bound)); tr > p.MaxRows.DroppedShare+0.15 || tr >= truth {
		t.Errorf("at the proposed %v the true share dropped is %.3f (stated %.3f; at 8: %.3f)", p.MaxRows.Bound, tr, p.MaxRows.DroppedShare, truth)
	}
	// Every customer orders in one region: one group per unit suffices.
	if p.MaxGroups != 1 {
		t.Errorf("proposed max_groups_per_unit %d, want 1 (every customer orders in one region)", p.MaxGroups)
	}
	if len(p.Columns) != 1 || p.Columns[0].Chosen.Lower != 0 || p.Columns[0].Chosen.Bound < 200 || p.Columns[0].Chosen.Bound > 700 {
		t.Errorf("amount proposal %+v, want [0, U] with U in [200, 700] (amounts run from 5 to 605)", p.Columns)
	}
}

// TestBoundsLedgerFirst: when the charge cannot be recorded nothing is
// read or printed.
func TestBoundsLedgerFirst(t *testing.T) {
	cfg := configFor(t, boundsConfig, nil)
	cfg.LedgerUpstream = "postgres://nobody@127.0.0.1:1/none?connect_timeout=2"
	var out bytes.Buffer
	if _, err := bounds.Run(ctx, cfg, bounds.Options{Epsilon: 1}, &out); err == nil {
		t.Fatal("bounds ran without a ledger")
	}
	if out.Len() != 0 {
		t.Errorf("printed without a recorded charge:\n%s", out.String())
	}
}

// TestBoundsExact: exact mode charges nothing, says loudly that its
// figures are unprotected, and measures the truth; -write puts the
// bounds and their bias into the file, comments kept, and the result
// loads.
func TestBoundsExact(t *testing.T) {
	cfg := configFor(t, boundsConfig, nil)
	n0, _ := operatorCharges(t)
	var out bytes.Buffer
	props, err := bounds.Run(ctx, cfg, bounds.Options{Exact: true}, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	if n1, _ := operatorCharges(t); n1 != n0 {
		t.Errorf("exact mode charged the ledger (%d charges, then %d)", n0, n1)
	}
	if !strings.HasPrefix(out.String(), "WARNING: exact mode") || !strings.Contains(out.String(), "NOT") {
		t.Errorf("exact mode's output does not start with its warning:\n%s", out.String())
	}
	at8, _ := rowAt(props[0].RowsTrade, 8)
	// Exact up to the bins' width above 32 (the heavy customers' 300 orders
	// count as their bin's midpoint).
	if truth := trueRowsDropped(t, 8); math.Abs(at8.DroppedShare-truth) > 0.005 {
		t.Errorf("exact rows dropped at 8: %v, true %v", at8.DroppedShare, truth)
	}

	path := filepath.Join(t.TempDir(), "dpproxy.yaml")
	if err := os.WriteFile(path, []byte(upstreams(boundsConfig)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := bounds.Write(path, props, bounds.Provenance{Exact: true, At: "2026-11-24"}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	t.Log(string(data))
	if !strings.Contains(string(data), "# the demo's orders") || !strings.Contains(string(data), "# too small for half the customers") {
		t.Errorf("comments lost:\n%s", data)
	}
	got, err := conf.Parse(path, data, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	o := got.Table("public", "orders")
	if o.MaxRowsPerUnit != int64(props[0].MaxRows.Bound) || o.Bias == nil || o.Bias.Measured != conf.BiasExact ||
		o.Bias.RowsDropped == nil || math.Abs(*o.Bias.RowsDropped-props[0].MaxRows.DroppedShare) > 1e-4 {
		t.Errorf("written table %+v, bias %+v; want max_rows_per_unit %v and its bias", o, o.Bias, props[0].MaxRows.Bound)
	}
	if a := o.Columns["amount"]; a.Bias == nil || a.Bias.SumClamped == nil || *a.Upper != props[0].Columns[0].Chosen.Bound {
		t.Errorf("written amount %+v, want the proposed bounds and their bias", a)
	}
}
