package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/testconf"
)

// tableBudgetSetup creates two private tables of its own (fresh names, so
// that their budgets in the shared ledger start empty) and a proxy with a
// budget of (2.5, 1e-6) on the first, none on the second, and two
// analysts with ample budgets of their own. It returns the proxy's
// address, the two tables' names and the proxy's configuration.
func tableBudgetSetup(t *testing.T, analysts ...string) (addr, visits, clicks string, cfg *conf.Config) {
	t.Helper()
	var b [4]byte
	rand.Read(b[:])
	sfx := hex.EncodeToString(b[:])
	visits, clicks = "e2e_tb_visits_"+sfx, "e2e_tb_clicks_"+sfx
	for _, tbl := range []string{visits, clicks} {
		if _, err := direct(t).Exec(ctx, fmt.Sprintf(
			"CREATE TABLE %[1]s (uid int, v int); INSERT INTO %[1]s SELECT u, u %% 7 FROM generate_series(1, 200) u", tbl)); err != nil {
			t.Fatal(err)
		}
	}
	yaml := tableBudgetYAML(visits, clicks, analysts...)
	cfg = configFor(t, yaml, map[string]string{"PW": "pw"})
	_, addr, _ = startProxyWith(t, cfg)
	return addr, visits, clicks, cfg
}

// tableBudgetYAML is tableBudgetSetup's configuration (upstream: UPSTREAM).
func tableBudgetYAML(visits, clicks string, analysts ...string) string {
	var users strings.Builder
	users.WriteString("users:\n")
	for _, a := range analysts {
		fmt.Fprintf(&users, "  - {name: %s, password_env: PW, budget: {epsilon: 20, delta: 1.0e-5}}\n", a)
	}
	return testconf.Get("e2e_proxy").Merge(users.String(), "auth").
		Merge(fmt.Sprintf("{public.%s: {privacy_unit: uid, budget: {epsilon: 2.5, delta: 1.0e-6}}, public.%s: {privacy_unit: uid}}", visits, clicks), "tables").
		Merge("{mechanism: laplace, response_quantum: 1ms, accounting: basic}", "privacy").String()
}

// TestTableBudgetPooledAnalysts: two analysts whose queries over one table
// together exhaust its budget: the third query over it is refused for
// both (53400, naming the table), although each analyst has ample budget;
// a repeated question is the cached answer, free for the table too; a
// query over another table still runs; a UNION ALL touching the exhausted
// table is refused as a whole; and the ledger shows the table spent by both.
func TestTableBudgetPooledAnalysts(t *testing.T) {
	addr, visits, clicks, _ := tableBudgetSetup(t, "tb_ann", "tb_bob")
	ann, err := dialAt(addr, "tb_ann", "pw")
	if err != nil {
		t.Fatal(err)
	}
	defer ann.Close(ctx)
	bob, err := dialAt(addr, "tb_bob", "pw")
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close(ctx)

	var n int64
	first := fmt.Sprintf("SELECT count(*) FROM %s WHERE v > 1", visits)
	if err := ann.QueryRow(ctx, first).Scan(&n); err != nil {
		t.Fatalf("ann's first query: %v", err)
	}
	if err := bob.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s WHERE v > 2", visits)).Scan(&n); err != nil {
		t.Fatalf("bob's first query: %v", err)
	}
	for who, q := range map[string]string{"tb_ann": fmt.Sprintf("SELECT count(*) FROM %s WHERE v > 3", visits), "tb_bob": fmt.Sprintf("SELECT count(*) FROM %s WHERE v > 4", visits)} {
		conn := ann
		if who == "tb_bob" {
			conn = bob
		}
		err := conn.QueryRow(ctx, q).Scan(&n)
		var pgErr *pgconn.PgError
		if sqlState(err) != "53400" || !errors.As(err, &pgErr) || !strings.Contains(pgErr.Message, "privacy budget of table public."+visits+" exceeded") {
			t.Errorf("%s's third query over the table: %v, want 53400 naming the table's budget", who, err)
		}
	}
	// The cached answer is the same release: free for the analyst and the table.
	if err := ann.QueryRow(ctx, first).Scan(&n); err != nil {
		t.Errorf("ann's repeated first question (cached): %v", err)
	}
	// Another table has no budget of its own: still answered.
	if err := ann.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s", clicks)).Scan(&n); err != nil {
		t.Errorf("a query over %s: %v", clicks, err)
	}
	// A UNION ALL reads both tables: refused, since one is exhausted.
	union := fmt.Sprintf("SELECT count(*) FROM %s UNION ALL SELECT count(*) FROM %s", clicks, visits)
	if _, err := bob.Exec(ctx, union); sqlState(err) != "53400" {
		t.Errorf("UNION ALL over %s and the exhausted %s: %v, want 53400", clicks, visits, err)
	}
	spent := ledgerText(t, `SELECT epsilon_spent::text FROM dpproxy.table_budgets WHERE table_name = $1`, "public."+visits)
	if spent != "2" {
		t.Errorf("table_budgets.epsilon_spent of %s = %s, want 2 (two queries of ε = 1)", visits, spent)
	}
	charged := ledgerText(t, `SELECT string_agg(c.analyst, ',' ORDER BY c.id) FROM dpproxy.charges c JOIN dpproxy.charge_tables t ON t.charge_id = c.id WHERE t.table_name = $1`, "public."+visits)
	if charged != "tb_ann,tb_bob" {
		t.Errorf("charges recorded against %s: %s, want tb_ann,tb_bob", visits, charged)
	}
}

// TestTableBudgetAcrossProxies: three analysts on two proxies sharing the
// ledger, 12 clients asking distinct questions at once over a table whose
// budget fits five of them: exactly five are answered, every other is
// refused with 53400, and the table's spend is the budget.
func TestTableBudgetAcrossProxies(t *testing.T) {
	analysts := []string{"tb_cy", "tb_dee", "tb_eve"}
	addr, visits, _, cfg := tableBudgetSetup(t, analysts...)
	_, addr2, _ := startProxyWith(t, cfg) // a second proxy on the same ledger
	addrs := []string{addr, addr2}
	const clients = 12
	errs := make(chan error, clients)
	for i := range clients {
		go func() {
			conn, err := dialAt(addrs[i%2], analysts[i%3], "pw")
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close(ctx)
			if _, err := conn.Exec(ctx, "SET dp.epsilon = 0.5"); err != nil {
				errs <- err
				return
			}
			var n int64
			errs <- conn.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s WHERE v > %d", visits, i)).Scan(&n)
		}()
	}
	ok, refused := 0, 0
	for range clients {
		switch err := <-errs; {
		case err == nil:
			ok++
		case sqlState(err) == "53400":
			refused++
		default:
			t.Errorf("query failed other than by the table's budget: %v", err)
		}
	}
	if ok != 5 || refused != clients-5 {
		t.Errorf("answered %d, refused %d; want 5 answered (2.5 / 0.5), %d refused", ok, refused, clients-5)
	}
	if spent := ledgerText(t, `SELECT epsilon_spent::text FROM dpproxy.table_budgets WHERE table_name = $1`, "public."+visits); spent != "2.5" {
		t.Errorf("table spend = %s, want 2.5", spent)
	}
}

// TestTableBudgetWhatTheAnalystSees: the NOTICE's DETAIL after a charged
// answer states the analyst's spent and remaining (ε, δ) and how many more
// queries like it fit, naming the table budget when that binds; EXPLAIN DP
// states both budgets and how many fit; SHOW dp.budget adds a row per
// table budget.
func TestTableBudgetWhatTheAnalystSees(t *testing.T) {
	addr, visits, clicks, _ := tableBudgetSetup(t, "tb_fay")
	cc, err := pgx.ParseConfig(fmt.Sprintf("postgres://tb_fay:pw@%s/shop?sslmode=disable", addr))
	if err != nil {
		t.Fatal(err)
	}
	cc.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	var mu sync.Mutex
	var details []string
	cc.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		details = append(details, n.Detail)
		mu.Unlock()
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	lastDetail := func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(details) == 0 {
			return ""
		}
		// The DETAIL's budget line, after the bounds' and their bias's.
		lines := strings.Split(details[len(details)-1], "\n")
		return lines[len(lines)-1]
	}
	explain := func(q string) string {
		rows, err := conn.Query(ctx, "EXPLAIN DP "+q)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for rows.Next() {
			var l string
			if err := rows.Scan(&l); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, l)
		}
		return strings.Join(lines, "\n")
	}

	q := fmt.Sprintf("SELECT count(*) FROM %s WHERE v > 0", visits)
	plan := explain(q)
	for _, want := range []string{
		"Budget of tb_fay (basic accounting): spent ε=0 δ=0, remaining ε=20 δ=0.00001; 2 queries like this one fit (the budget of table public." + visits + ", shared by all analysts, allows the fewest), this one included",
		"Budget of table public." + visits + ", shared by all analysts: spent ε=0 δ=0, remaining ε=2.5 δ=0.000001",
	} {
		if !strings.Contains(plan, want) {
			t.Errorf("EXPLAIN DP lacks %q:\n%s", want, plan)
		}
	}
	if i, j := strings.Index(plan, "Budget of tb_fay"), strings.Index(plan, "Rewritten SQL"); i < 0 || j < 0 || i > j {
		t.Errorf("EXPLAIN DP: the budgets should come before the rewritten SQL:\n%s", plan)
	}
	var n int64
	if err := conn.QueryRow(ctx, q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if got, want := lastDetail(), "budget (basic accounting): spent ε=1 δ=0, remaining ε=19 δ=0.00001; 1 more query like this one fits (the budget of table public."+visits+", shared by all analysts, allows the fewest)"; got != want {
		t.Errorf("NOTICE DETAIL = %q, want %q", got, want)
	}
	if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s", clicks)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if got, want := lastDetail(), "budget (basic accounting): spent ε=2 δ=0, remaining ε=18 δ=0.00001; 18 more queries like this one fit"; got != want {
		t.Errorf("NOTICE DETAIL over a table without a budget = %q, want %q", got, want)
	}

	rows, err := conn.Query(ctx, "SHOW dp.budget")
	if err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, f := range rows.FieldDescriptions() {
		cols = append(cols, f.Name)
	}
	var got []string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, v := range vals[:4] {
			f, err := toFloat(v)
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, fmt.Sprint(f))
		}
		got = append(got, strings.Join(append(parts, fmt.Sprint(vals[4])), " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if c := strings.Join(cols, ","); c != "epsilon_spent,epsilon_remaining,delta_spent,delta_remaining,budget" {
		t.Errorf("SHOW dp.budget columns = %s", c)
	}
	want := []string{"2 18 0 1e-05 analyst tb_fay", "1 1.5 0 1e-06 table public." + visits}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("SHOW dp.budget =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestTableBudgetOperatorCommand: dpproxy budget show lists the analyst's
// charges and the table budgets, list the analysts then the table
// budgets, each with what all analysts spent on it.
func TestTableBudgetOperatorCommand(t *testing.T) {
	bin := buildDpproxy(t)
	addr, visits, clicks, _ := tableBudgetSetup(t, "tb_gus")
	conn, err := dialAt(addr, "tb_gus", "pw")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int64
	if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s WHERE v > 5", visits)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tb.yaml")
	if err := os.WriteFile(path, []byte(upstreams(tableBudgetYAML(visits, clicks, "tb_gus"))), 0o600); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"budget", "-config", path}, args...)...)
		cmd.Env = append(os.Environ(), "PW=pw")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("dpproxy budget %q: %v\n%s", args, err, out)
		}
		return string(out)
	}
	row := `(?m)^public\.` + visits + `\s+1\s+1\.5\s+2\.5\s+0\s+1e-06\s+1e-06\s+basic\s+yes$`
	show := cli("show", "tb_gus")
	for _, want := range []string{`ε: spent 1, remaining 19, limit 20`, `charge\s+tb_gus\s+\w+\s+1\s+0`, `table budgets \(shared by all analysts\):`, row} {
		if !matches(show, want) {
			t.Errorf("budget show lacks %q:\n%s", want, show)
		}
	}
	if list := cli("list"); !matches(list, `(?m)^tb_gus\s+1\s+19\s+20\s`) || !matches(list, row) {
		t.Errorf("budget list:\n%s", list)
	}
}
