package e2e

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

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
	// The operator's row reads as spent = limit (budget show @operator).
	pool, err := pgxpool.New(ctx, env.roles.LedgerURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	l, err := budget.Attach(ctx, pool, budget.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := l.Spent(ctx, budget.OperatorSubject); err != nil || math.Abs(s.EpsilonSpent-eps1) > 1e-9 || s.EpsilonRemaining() != 0 {
		t.Errorf("Spent(%s) = %+v, %v; want ε spent %v, nothing remaining", budget.OperatorSubject, s, err, eps1)
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
	props, err := bounds.Run(ctx, cfg, bounds.Options{Exact: true, GroupBy: []string{"orders.channel"}}, &out)
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
	// Channel has no public values: measured on request (-group-by). A
	// customer uses up to four channels, so 4 groups drop no pair and
	// the proposal keeps several.
	p := props[0]
	if len(p.Groups) != 2 || p.Groups[1].Column != "channel" {
		t.Fatalf("groups measured: %+v, want region and channel", p.Groups)
	}
	if r, ok := rowAt(p.Groups[1].GroupTrade, 4); !ok || r.DroppedShare != 0 {
		t.Errorf("channel at 4 groups per customer: %+v, want no pair dropped", r)
	}
	if r, _ := rowAt(p.Groups[1].GroupTrade, 1); r.DroppedShare < 0.3 {
		t.Errorf("channel at 1 group per customer drops %v of the pairs, want most customers' other channels", r.DroppedShare)
	}
	if p.MaxGroups < 2 {
		t.Errorf("proposed max_groups_per_unit %d with channel measured, want at least 2", p.MaxGroups)
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
	if _, ok := o.Bias.GroupsDropped["channel"]; !ok {
		t.Errorf("written groups_dropped %v lacks channel", o.Bias.GroupsDropped)
	}
	if a := o.Columns["amount"]; a.Bias == nil || a.Bias.SumClamped == nil || *a.Upper != props[0].Columns[0].Chosen.Bound {
		t.Errorf("written amount %+v, want the proposed bounds and their bias", a)
	}
}

// TestBiasInNoticeAndExplain: with bias metadata in the configuration
// (as bounds -write puts it), the NOTICE's DETAIL and EXPLAIN DP state the
// bounds and the bias, and the released count lies within its stated
// error bar of the truth minus the stated bias; without metadata they say
// the bias is unknown.
func TestBiasInNoticeAndExplain(t *testing.T) {
	share := trueRowsDropped(t, 8)
	yaml := strings.Replace(boundsConfig, "bounds_analyst", "bias_analyst", 1)
	yaml = strings.Replace(yaml, "    columns:\n      amount:", "    bias: {measured: exact, at: 2026-11-24, max_rows_per_unit: 8, rows_dropped: "+
		strconv.FormatFloat(math.Round(share*1e4)/1e4, 'f', -1, 64)+"}\n    columns:\n      amount:", 1)
	cfg := configFor(t, yaml, nil)
	_, addr, _ := startProxyWith(t, cfg)
	cc, err := pgx.ParseConfig("postgres://bias_analyst@" + addr + "/shop?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	cc.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	var mu sync.Mutex
	var notices []*pgconn.Notice
	cc.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		notices = append(notices, n)
		mu.Unlock()
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	pct := strconv.FormatFloat(100*math.Round(share*1e4)/1e4, 'f', 1, 64) + "%"
	lines := explainOf(t, conn, "EXPLAIN DP SELECT count(*) FROM orders")
	if want := "Bias of the contribution bounds (measured exactly, 2026-11-24): about " + pct + " of the table's rows dropped"; !containsLine(lines, want) {
		t.Errorf("EXPLAIN DP lacks %q:\n%s", want, strings.Join(lines, "\n"))
	}
	var got int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM orders").Scan(&got); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(notices) != 1 {
		t.Fatalf("%d notices, want 1", len(notices))
	}
	// The DETAIL's first line: the bounds and their bias (the budget's
	// line follows it: proxy/tables.go).
	if want := "contribution bounds: ≤8 rows per customer_id; bias (measured exactly, 2026-11-24): about " + pct + " of the table's rows dropped"; strings.Split(notices[0].Detail, "\n")[0] != want {
		t.Errorf("NOTICE DETAIL %q, want its first line %q", notices[0].Detail, want)
	}
	if !strings.HasPrefix(notices[0].Message, "dp: count: ±24.5 (95%)") {
		t.Errorf("NOTICE %q, want the count's ±24.5 bar (the noise's ±24 and the rounding's 0.5)", notices[0].Message)
	}
	var total int64
	if err := direct(t).QueryRow(ctx, "SELECT count(*) FROM orders").Scan(&total); err != nil {
		t.Fatal(err)
	}
	// Within the bar (three times it: a 1-in-8000 miss) of the truth
	// less the stated bias.
	if expect := float64(total) * (1 - share); math.Abs(float64(got)-expect) > 3*24+1 {
		t.Errorf("count %d; truth %d less the stated %s is %.0f, more than 3 bars away", got, total, pct, expect)
	}

	// The shared proxy's configuration has no metadata.
	lines = explainOf(t, connect(t, "alice", pwAlice), "EXPLAIN DP SELECT count(*) FROM orders")
	if want := "Bias of the contribution bounds: unknown (not measured: dpproxy bounds)"; !containsLine(lines, want) {
		t.Errorf("EXPLAIN DP without metadata lacks %q:\n%s", want, strings.Join(lines, "\n"))
	}
}

func explainOf(t *testing.T, conn *pgx.Conn, sql string) []string {
	t.Helper()
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

func containsLine(lines []string, want string) bool {
	for _, l := range lines {
		if l == want {
			return true
		}
	}
	return false
}
