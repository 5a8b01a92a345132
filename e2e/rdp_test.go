package e2e

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/conf"
)

// TestBudgetRDPAccounting: through the proxy, the default accounting (rdp)
// admits COUNT(*) queries at ε = 0.05 beyond basic composition's 40
// within (2, 1e-6), exactly as many as the pure accountant admits for the
// query's release (Laplace, L0 = 1, L∞ = 8, b = 160), and refuses the
// next with 53400; each charge's release is in dpproxy.releases; SHOW
// dp.budget reports the accountant's figures; EXPLAIN DP does not
// subtract.
func TestBudgetRDPAccounting(t *testing.T) {
	const analyst = "e2e_rdp"
	yaml := procConfig("127.0.0.1:0", analyst, 2).
		Merge("{accounting: ~, max_epsilon_per_query: 1}", "privacy").String()
	cfg := configFor(t, yaml, map[string]string{"E2E_PROC_PW": procPassword})
	if cfg.Privacy.Accounting != conf.AccountingRDP {
		t.Fatalf("default accounting %q, want rdp", cfg.Privacy.Accounting)
	}
	_, addr, _ := startProxyWith(t, cfg)
	conn, err := dialAt(addr, analyst, procPassword)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET dp.epsilon = 0.05"); err != nil {
		t.Fatal(err)
	}
	// What the accountant admits, as a pure function of the releases.
	acct, err := budget.NewAccountant("")
	if err != nil {
		t.Fatal(err)
	}
	epsLim, _ := budget.ParseNumeric("2")
	deltaLim, _ := budget.ParseNumeric("0.000001")
	lim := budget.Limits{Epsilon: epsLim, Delta: deltaLim}
	c := budget.Charge{Epsilon: 0.05, Rho: budget.PureRho(0.05),
		Releases: []budget.Release{{Mechanism: budget.MechLaplace, L0: 1, Sensitivity: 8, Scale: 8 / 0.05, Epsilon: 0.05}}}
	var tot budget.Totals
	want := 0
	for {
		next, ok := acct.Compose(tot, lim, c)
		if !ok {
			break
		}
		tot, want = next, want+1
	}
	if want <= 40 {
		t.Fatalf("the accountant admits %d, no more than basic composition's 40", want)
	}
	admitted := 0
	for i := range want + 1 {
		var v int64
		err := conn.QueryRow(ctx, question(300+i)).Scan(&v)
		if err != nil {
			if sqlState(err) != "53400" {
				t.Fatalf("query %d: %v", i+1, err)
			}
			break
		}
		admitted++
	}
	if admitted != want {
		t.Errorf("admitted %d queries at ε = 0.05 within (2, 1e-6), want %d (basic composition: 40)", admitted, want)
	}
	n := ledgerText(t, `SELECT count(*)::text FROM dpproxy.releases r JOIN dpproxy.charges c ON c.id = r.charge_id
		WHERE c.analyst = $1 AND r.mechanism = 'laplace' AND r.l0 = 1 AND r.sensitivity = 8 AND r.scale = 160`, analyst)
	if n != ledgerText(t, `SELECT count(*)::text FROM dpproxy.charges WHERE analyst = $1 AND action = 'charge'`, analyst) || n == "0" {
		t.Errorf("%s Laplace releases recorded for the analyst's charges", n)
	}
	b := showBudget(t, conn)
	rep := acct.Report(tot, lim)
	if math.Abs(b.epsSpent-rep.EpsilonSpent) > 1e-9 || b.epsSpent > 2 || math.Abs(b.deltaSpent-0.9e-6) > 1e-15 {
		t.Errorf("SHOW dp.budget = %+v, want ε spent %v (the filter's), δ spent 9e-7 (set aside for the conversion)", b, rep.EpsilonSpent)
	}
	t.Logf("rdp: %d queries at ε = 0.05 within (2, 1e-6) (basic: 40); SHOW dp.budget ε spent %.4g", admitted, b.epsSpent)
	rows, err := conn.Query(ctx, "EXPLAIN DP "+question(999))
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if text := strings.Join(plan, "\n"); strings.Contains(text, "Budget left after this query") || !strings.Contains(text, "rdp accounting") {
		t.Errorf("EXPLAIN DP under rdp accounting:\n%s", text)
	}
}

// TestRDPRecordsEveryRelease: under rdp with Gaussian noise, a query with
// partition selection, an average and a percentile is admitted (its
// releases add up to its charge) and its releases are recorded: Gaussian
// noise for each noised part, the percentile's exponential mechanism, and
// the selection's threshold δ; the Rényi sums are stored with it.
func TestRDPRecordsEveryRelease(t *testing.T) {
	const analyst = "e2e_rdp_releases"
	yaml := procConfig("127.0.0.1:0", analyst, 2).
		Merge("{accounting: rdp, mechanism: gaussian, max_epsilon_per_query: 1}", "privacy").String()
	cfg := configFor(t, yaml, map[string]string{"E2E_PROC_PW": procPassword})
	_, addr, _ := startProxyWith(t, cfg)
	conn, err := dialAt(addr, analyst, procPassword)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT region, count(*), avg(amount), percentile_cont(0.5) WITHIN GROUP (ORDER BY amount) FROM orders GROUP BY region`)
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatalf("query under rdp: %v", err)
	}
	got := ledgerText(t, `SELECT string_agg(r.mechanism, ',' ORDER BY r.ordinal) FROM dpproxy.releases r
		JOIN dpproxy.charges c ON c.id = r.charge_id WHERE c.analyst = $1`, analyst)
	// count, avg's sum (its count is the released count(*): amount is NOT
	// NULL, rewrite/derive.go), the percentile, the selection's noise and
	// threshold.
	if want := "gaussian,gaussian,exponential,gaussian,selection"; got != want {
		t.Errorf("releases recorded: %s, want %s", got, want)
	}
	if n := ledgerText(t, `SELECT count(*)::text FROM dpproxy.budgets WHERE analyst = $1 AND rdp_through IS NOT NULL AND rdp_spent[array_length(rdp_spent, 1)] = 'Infinity'`, analyst); n != "1" {
		t.Errorf("the analyst's Rényi sums are not stored (or the ∞ order of a Gaussian release is finite)")
	}
}

// TestRDPExplainAndNoticeAgree: EXPLAIN DP's "N queries like this one fit,
// this one included" and, once the query ran, the NOTICE's "M more fit"
// come from one charge (proxy/answer.go, chargeOf): M = N − 1. EXPLAIN DP
// used to count a charge without its releases, which the rdp accountant
// reads as one pure (ε, δ) release: 10 fit where 14 do (a GROUP BY over 4
// public regions, whose Laplace releases compose below ε each).
func TestRDPExplainAndNoticeAgree(t *testing.T) {
	const analyst = "e2e_rdp_agree"
	yaml := procConfig("127.0.0.1:0", analyst, 10).Merge("{accounting: ~}", "privacy").
		Set("{public_values: [north, south, east, west]}", "tables", "public.orders", "columns", "region").String()
	cfg := configFor(t, yaml, map[string]string{"E2E_PROC_PW": procPassword})
	_, addr, _ := startProxyWith(t, cfg)
	cc, err := pgx.ParseConfig(fmt.Sprintf("postgres://%s:%s@%s/shop?sslmode=disable", analyst, procPassword, addr))
	if err != nil {
		t.Fatal(err)
	}
	cc.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	var details []string
	cc.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { details = append(details, n.Detail) }
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	const q = "SELECT region, count(*) FROM orders GROUP BY region"
	var plan []string
	rows, err := conn.Query(ctx, "EXPLAIN DP "+q)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, l)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	fit := regexp.MustCompile(`(\d+) quer(?:y|ies) like this one fits?, this one included`)
	var n int
	for _, l := range plan {
		if m := fit.FindStringSubmatch(l); m != nil {
			n, _ = strconv.Atoi(m[1])
		}
	}
	if n == 0 {
		t.Fatalf("EXPLAIN DP says nothing of how many fit:\n%s", strings.Join(plan, "\n"))
	}
	if _, err := conn.Exec(ctx, q); err != nil {
		t.Fatal(err)
	}
	more := regexp.MustCompile(`(\d+) more quer(?:y|ies) like this one fits?`)
	var m []string
	for _, d := range details {
		if m = more.FindStringSubmatch(d); m != nil {
			break
		}
	}
	if m == nil {
		t.Fatalf("the NOTICE's DETAIL says nothing of how many more fit: %q", details)
	}
	t.Logf("EXPLAIN DP: %d fit; NOTICE: %s more", n, m[1])
	if got, _ := strconv.Atoi(m[1]); got != n-1 {
		t.Errorf("EXPLAIN DP said %d fit (this one included), the NOTICE after it %d more: one of them counts another charge", n, got)
	}
}
