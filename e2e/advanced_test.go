package e2e

import (
	"math"
	"strings"
	"testing"

	"github.com/dpproxy/dpproxy/budget"
)

// TestBudgetAdvancedAccounting: through the proxy, advanced accounting
// admits COUNT(*) queries at ε = 0.05 beyond basic composition's 40 within
// (2, 1e-6): the filter (δ′ = 1e-7) admits Σε² up to 0.117, i.e. 46, and
// refuses the 47th with 53400. SHOW dp.budget reports the filter's ε and
// the δ′ set aside; EXPLAIN DP does not subtract.
func TestBudgetAdvancedAccounting(t *testing.T) {
	const analyst = "e2e_advanced"
	yaml := procConfig("127.0.0.1:0", analyst, 2).
		Merge("{accounting: advanced, advanced_delta: 1.0e-7, max_epsilon_per_query: 1}", "privacy").String()
	cfg := configFor(t, yaml, map[string]string{"E2E_PROC_PW": procPassword})
	_, addr, _ := startProxyWith(t, cfg)
	conn, err := dialAt(addr, analyst, procPassword)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET dp.epsilon = 0.05"); err != nil {
		t.Fatal(err)
	}
	const want = 46
	admitted := 0
	for i := range want + 1 {
		var v int64
		err := conn.QueryRow(ctx, question(200+i)).Scan(&v)
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
	var sq, eps float64
	if err := direct(t).QueryRow(ctx, `SELECT epsilon_sq_spent::float8, epsilon_spent::float8 FROM dpproxy.budgets WHERE analyst = $1`, analyst).Scan(&sq, &eps); err != nil {
		t.Fatal(err)
	}
	if math.Abs(sq-want*0.0025) > 1e-12 || math.Abs(eps-want*0.05) > 1e-12 {
		t.Errorf("ledger: Σε² = %v, Σε = %v; want %v, %v", sq, eps, want*0.0025, want*0.05)
	}
	b := showBudget(t, conn)
	wantEps := budget.AdvancedEpsilon(want*0.0025, 2, 1e-7)
	if math.Abs(b.epsSpent-wantEps) > 1e-9 || b.epsSpent > 2 || math.Abs(b.deltaSpent-1e-7) > 1e-15 {
		t.Errorf("SHOW dp.budget = %+v, want ε spent %v (the filter's), δ spent 1e-7 (δ′)", b, wantEps)
	}
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
	if text := strings.Join(plan, "\n"); strings.Contains(text, "Budget left after this query") || !strings.Contains(text, "advanced accounting") {
		t.Errorf("EXPLAIN DP under advanced accounting:\n%s", text)
	}
}
