package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dpproxy/dpproxy/budget"
	"github.com/dpproxy/dpproxy/conf"
	"github.com/dpproxy/dpproxy/internal/testconf"
	"github.com/dpproxy/dpproxy/noise"
	"github.com/dpproxy/dpproxy/rewrite"
)

// This file tests the budget ledger across real proxy processes: the
// dpproxy binary is built once per test and run as subprocesses
// (dpproxy serve -config FILE) against the shared test database.

// procConfig is a proxy configuration for subprocess tests
// (testconf.Proc): analyst is the test's own (budgets live in the shared
// ledger), with a budget of budgetEps, and listen its address.
func procConfig(listen, analyst string, budgetEps float64) *testconf.Config {
	return testconf.Get(testconf.Proc).SetString(listen, "listen").
		SetString(analyst, "auth", "users", "0", "name").Set(fmt.Sprint(budgetEps), "auth", "users", "0", "budget", "epsilon")
}

const procPassword = "proc-secret"

// buildDpproxy builds the dpproxy binary into a temporary directory.
func buildDpproxy(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "dpproxy")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if p, err := exec.LookPath("go"); err == nil {
		gobin = p
	}
	cmd := exec.Command(gobin, "build", "-o", bin, "github.com/dpproxy/dpproxy/cmd/dpproxy")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// freePort returns an address on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// proc is a dpproxy subprocess on a fixed address, restartable.
type proc struct {
	t          *testing.T
	bin, conf  string
	addr       string
	cmd        *exec.Cmd
	stderr     *bytes.Buffer
	exited     chan struct{}
	stderrLock sync.Mutex
}

func (p *proc) Write(b []byte) (int, error) {
	p.stderrLock.Lock()
	defer p.stderrLock.Unlock()
	return p.stderr.Write(b)
}

// startProc writes a configuration for analyst with an ε budget and runs
// the proxy, waiting until it accepts connections.
func startProc(t *testing.T, bin, analyst string, budgetEps float64) *proc {
	t.Helper()
	return startProcWith(t, bin, analyst, budgetEps, "")
}

// startProcWith is startProc under the accounting named (privacy.accounting;
// "" keeps the test configuration's).
func startProcWith(t *testing.T, bin, analyst string, budgetEps float64, accounting string) *proc {
	t.Helper()
	addr := freePort(t)
	cfg := procConfig(addr, analyst, budgetEps)
	if accounting != "" {
		cfg = cfg.Merge("{accounting: "+accounting+"}", "privacy")
	}
	yaml := upstreams(cfg.String())
	path := filepath.Join(t.TempDir(), analyst+".yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, bin: bin, conf: path, addr: addr, stderr: new(bytes.Buffer)}
	p.start()
	t.Cleanup(p.kill)
	return p
}

func (p *proc) start() {
	p.t.Helper()
	p.cmd = exec.Command(p.bin, "serve", "-config", p.conf, "-log-level", "warn")
	p.cmd.Env = append(os.Environ(), "E2E_PROC_PW="+procPassword)
	p.cmd.Stderr = p
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) { cmd.Wait(); close(exited) }(p.cmd, p.exited)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", p.addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-p.exited:
			p.t.Fatalf("dpproxy exited during start-up: %s", p.log())
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("dpproxy did not listen on %s within 30 s: %s", p.addr, p.log())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	p.cmd = nil
}

func (p *proc) log() string {
	p.stderrLock.Lock()
	defer p.stderrLock.Unlock()
	return p.stderr.String()
}

// question is the SQL of the i-th distinct test question: a noisy count,
// charged ε = 1 and δ = 0 (no GROUP BY, no partition selection).
func question(i int) string {
	return fmt.Sprintf("SELECT count(*) FROM orders WHERE amount > %d", i)
}

// ledgerText runs a one-value query straight on the test database.
func ledgerText(t *testing.T, sql string, args ...any) string {
	t.Helper()
	var s string
	if err := direct(t).QueryRow(ctx, sql, args...).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

// storedAnswers returns the first value of each stored answer of analyst
// to question(0) ... question(n-1), asked at the subprocess defaults (ε = 1,
// δ = 1e-7, Laplace), by question number.
func storedAnswers(t *testing.T, analyst string, n int) map[int]string {
	t.Helper()
	an := rewrite.New(env.cfg, rewrite.Options{})
	// The answers were rendered under the server's default settings (the
	// clients set none), which a fresh connection shows.
	var settings string
	if err := direct(t).QueryRow(ctx, rewrite.RenderSettingsSQL).Scan(&settings); err != nil {
		t.Fatal(err)
	}
	byKey := map[string]int{}
	for q := range n {
		sts, err := an.Analyze(question(q))
		if err != nil || len(sts) != 1 {
			t.Fatalf("analyze %q: %v", question(q), err)
		}
		byKey[budget.CacheKey{Analyst: analyst, Query: sts[0].Key, Epsilon: 1, Delta: 1e-7, Mechanism: "laplace", Settings: settings}.Hash()] = q
	}
	rows, err := direct(t).Query(ctx, `SELECT key, answer FROM dpproxy.answers WHERE analyst = $1`, analyst)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	for rows.Next() {
		var key string
		var blob []byte
		if err := rows.Scan(&key, &blob); err != nil {
			t.Fatal(err)
		}
		q, ok := byKey[key]
		if !ok {
			t.Errorf("stored answer with key %s is for no test question", key)
			continue
		}
		var a struct{ Rows [][][]byte }
		if err := json.Unmarshal(blob, &a); err != nil || len(a.Rows) != 1 || len(a.Rows[0]) != 1 {
			t.Fatalf("stored answer %s: %v", blob, err)
		}
		out[q] = string(a.Rows[0][0])
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func matches(s, pattern string) bool { return regexp.MustCompile(pattern).MatchString(s) }

func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// TestTwoProxiesShareOneBudget: two proxy processes, one ledger, 50
// concurrent clients of one analyst (25 on each proxy) asking until the
// budget of ε = 30 runs out. Each question is asked by about three clients
// at once, across both proxies. The total charged must equal the budget,
// never exceed it, and equal the number of distinct answers released; all
// clients asking one question get the same noisy answer.
//
// It runs for every accounting: the number of questions answered must be
// what the accountant admits for the sequence, as a pure function.
func TestTwoProxiesShareOneBudget(t *testing.T) {
	bin := buildDpproxy(t)
	for _, accounting := range accountings {
		t.Run(accounting, func(t *testing.T) { twoProxiesShareOneBudget(t, bin, accounting) })
	}
}

// accountings are the values of privacy.accounting the crash and race
// tests run under.
var accountings = []string{conf.AccountingBasic, conf.AccountingZCDP, conf.AccountingAdvanced, conf.AccountingRDP}

// admits is how many COUNT(*) questions (L0 = 1, L∞ = 8, Laplace) at ε
// the accounting admits within (limit, 1e-6), computed by the accountant
// as a pure function.
func admits(t *testing.T, accounting string, eps, limit float64) int {
	t.Helper()
	a, err := budget.NewAccountant(accounting)
	if err != nil {
		t.Fatal(err)
	}
	le, _ := budget.ParseNumeric(fmt.Sprint(limit))
	ld, _ := budget.ParseNumeric("0.000001")
	c := budget.Charge{Epsilon: eps, Rho: budget.PureRho(eps),
		Releases: []budget.Release{{Mechanism: budget.MechLaplace, L0: 1, Sensitivity: 8, Scale: 8 / eps, Epsilon: eps}}}
	var tot budget.Totals
	for n := 0; ; n++ {
		next, ok := a.Compose(tot, budget.Limits{Epsilon: le, Delta: ld}, c)
		if !ok {
			return n
		}
		tot = next
	}
}

func twoProxiesShareOneBudget(t *testing.T, bin, accounting string) {
	const (
		clients = 50
		limit   = 30
	)
	analyst := "e2e_twoproxy_" + accounting
	procs := []*proc{startProcWith(t, bin, analyst, limit, accounting), startProcWith(t, bin, analyst, limit, accounting)}

	var mu sync.Mutex // guards got, failures
	got := map[int]map[int64]int{}
	var failures []error
	var next atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for c := range clients {
		conn, err := dialAt(procs[c%2].addr, analyst, procPassword)
		if err != nil {
			t.Fatalf("client %d: %v", c, err)
		}
		defer conn.Close(ctx)
		wg.Go(func() {
			<-start
			for {
				q := int(next.Add(1) / 3)
				var v int64
				err := conn.QueryRow(ctx, question(q)).Scan(&v)
				mu.Lock()
				switch {
				case err == nil:
					if got[q] == nil {
						got[q] = map[int64]int{}
					}
					got[q][v]++
				case sqlState(err) != "53400":
					failures = append(failures, fmt.Errorf("client %d, question %d: %w", c, q, err))
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	for _, err := range failures {
		t.Error(err)
	}
	for q, vals := range got {
		if len(vals) != 1 {
			t.Errorf("question %d was answered with %d different noisy values: %v", q, len(vals), vals)
		}
	}
	spent := ledgerText(t, `SELECT epsilon_spent::text FROM dpproxy.budgets WHERE analyst = $1`, analyst)
	charges := ledgerText(t, `SELECT count(*)::text FROM dpproxy.charges WHERE analyst = $1 AND action = 'charge'`, analyst)
	answers := ledgerText(t, `SELECT count(*)::text FROM dpproxy.answers WHERE analyst = $1`, analyst)
	want := fmt.Sprint(len(got))
	if spent != want || charges != want || answers != want {
		t.Errorf("distinct answers released %s; ledger: ε spent %s, %s charges, %s stored answers; want all equal", want, spent, charges, answers)
	}
	if want := admits(t, accounting, 1, limit); len(got) != want {
		t.Errorf("%d questions answered with a budget of %d at ε = 1 each under %s: want exactly %d (never more, and demand exceeded supply)", len(got), limit, accounting, want)
	}
	t.Logf("%s: %d questions answered by %d clients on 2 processes", accounting, len(got), clients)
}

// TestAnswerCacheSurvivesRestart: a question answered before a kill -9 gets
// the same noisy answer from the restarted proxy, at no charge; the same
// query at another ε is a new question.
//
// It runs for every accounting.
func TestAnswerCacheSurvivesRestart(t *testing.T) {
	bin := buildDpproxy(t)
	for _, accounting := range accountings {
		t.Run(accounting, func(t *testing.T) { answerCacheSurvivesRestart(t, bin, accounting) })
	}
}

func answerCacheSurvivesRestart(t *testing.T, bin, accounting string) {
	analyst := "e2e_cacherestart_" + accounting
	p := startProcWith(t, bin, analyst, 100, accounting)
	ask := func(sql string, setup ...string) int64 {
		t.Helper()
		conn, err := dialAt(p.addr, analyst, procPassword)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		for _, s := range setup {
			if _, err := conn.Exec(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		var v int64
		if err := conn.QueryRow(ctx, sql).Scan(&v); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return v
	}
	spent := func() string {
		return ledgerText(t, `SELECT epsilon_spent::text FROM dpproxy.budgets WHERE analyst = $1`, analyst)
	}
	first := ask(question(7))
	if s := spent(); s != "1" {
		t.Fatalf("ε spent after one question = %s, want 1", s)
	}
	p.kill()
	p.start()
	if again := ask(question(7)); again != first {
		t.Errorf("after kill -9 and restart the same question returned %d, before %d: fresh noise", again, first)
	}
	if s := spent(); s != "1" {
		t.Errorf("ε spent after asking again = %s, want 1 (no new charge)", s)
	}
	ask(question(7), "SET dp.epsilon = 0.5")
	if s := spent(); s != "1.5" {
		t.Errorf("ε spent after the question at ε = 0.5 = %s, want 1.5", s)
	}
}

// TestZCDPAccounting: with privacy.accounting: zcdp and Gaussian noise, an
// analyst with ε = 2 answers 8 queries at ε = 0.5 (basic composition would
// stop at 4), each charged ρ = Δ2²/(2σ²) with the sampler's σ, and SHOW
// dp.budget reports the Canonne–Kamath–Steinke conversion at δ_z.
func TestZCDPAccounting(t *testing.T) {
	const analyst = "e2e_zcdp"
	yaml := procConfig("127.0.0.1:0", analyst, 2).
		Merge("{mechanism: gaussian, accounting: zcdp, max_epsilon_per_query: 1}", "privacy").String()
	cfg := configFor(t, yaml, map[string]string{"E2E_PROC_PW": procPassword})
	_, addr, _ := startProxyWith(t, cfg)
	conn, err := dialAt(addr, analyst, procPassword)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET dp.epsilon = 0.5"); err != nil {
		t.Fatal(err)
	}
	const n = 8
	for i := range n {
		var v int64
		if err := conn.QueryRow(ctx, question(100+i)).Scan(&v); err != nil {
			t.Fatalf("query %d of %d at ε = 0.5 against ε = 2: %v", i+1, n, err)
		}
	}
	// One COUNT without GROUP BY: L0 = 1, L∞ = max_rows_per_unit = 8.
	sigma, err := noise.Gaussian().StdDev(1, 8, 0.5, 1e-7)
	if err != nil {
		t.Fatal(err)
	}
	wantRho := n * budget.GaussianRho(8, sigma)
	var rho, deltaApprox, epsSpent float64
	if err := direct(t).QueryRow(ctx, `SELECT rho_spent::float8, delta_approx_spent::float8, epsilon_spent::float8 FROM dpproxy.budgets WHERE analyst = $1`, analyst).Scan(&rho, &deltaApprox, &epsSpent); err != nil {
		t.Fatal(err)
	}
	if math.Abs(rho-wantRho) > 1e-12 || deltaApprox != 0 || epsSpent != 4 {
		t.Errorf("ledger: ρ = %v (want %v), approximate δ = %v (want 0), Σε = %v (want 4)", rho, wantRho, deltaApprox, epsSpent)
	}
	b := showBudget(t, conn)
	// The Canonne–Kamath–Steinke conversion at δ_z = 0.9·δ (the share the
	// filter sets aside, privacy.rdp_delta_share).
	wantEps := budget.ZCDPEpsilon(wantRho, 0.9e-6)
	if math.Abs(b.epsSpent-wantEps) > 1e-9 || math.Abs(b.epsLeft-(2-wantEps)) > 1e-9 || math.Abs(b.deltaSpent-0.9e-6) > 1e-15 || math.Abs(b.deltaLeft-1e-7) > 1e-15 {
		t.Errorf("SHOW dp.budget = %+v, want ε spent %v, remaining %v, δ spent 9e-7, remaining 1e-7", b, wantEps, 2-wantEps)
	}
	t.Logf("8 Gaussian queries at ε = 0.5: ρ = %.4g, reported ε = %.4g (basic composition: 4)", rho, b.epsSpent)

	// EXPLAIN DP must not claim a remaining budget by plain subtraction:
	// under zCDP the conversion is not additive.
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
	text := strings.Join(plan, "\n")
	if strings.Contains(text, "Budget left after this query") || !strings.Contains(text, "zCDP accounting") {
		t.Errorf("EXPLAIN DP under zCDP accounting:\n%s", text)
	}
}

// TestOperatorBudgetCommand: dpproxy budget list|show|grant against the
// ledger; a grant is audited and survives a restart with the configured
// budget applied on top.
func TestOperatorBudgetCommand(t *testing.T) {
	const analyst = "e2e_budgetcli"
	bin := buildDpproxy(t)
	p := startProc(t, bin, analyst, 3)
	conn, err := dialAt(p.addr, analyst, procPassword)
	if err != nil {
		t.Fatal(err)
	}
	var v int64
	if err := conn.QueryRow(ctx, question(1)).Scan(&v); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	cli := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"budget", "-config", p.conf}, args...)...)
		cmd.Env = append(os.Environ(), "E2E_PROC_PW="+procPassword)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("dpproxy budget %q: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := cli("list"); !matches(out, `(?m)^`+analyst+`\s+1\s+2\s+3\s+0\s+1e-06\s+1e-06\s+basic\s+1$`) {
		t.Errorf("budget list:\n%s", out)
	}
	if out := cli("-by", "ops-ann", "grant", analyst, "2", "0"); !strings.Contains(out, "ε: spent 1, remaining 4, limit 5") {
		t.Errorf("budget grant:\n%s", out)
	}
	// Restart with the configured budget raised from 3 to 4: the limit is
	// the new budget plus the grant, and the spend is kept.
	p.kill()
	yaml, err := os.ReadFile(p.conf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.conf, bytes.Replace(yaml, []byte("epsilon: 3,"), []byte("epsilon: 4,"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	p.start()
	out := cli("show", analyst)
	for _, want := range []string{`ε: spent 1, remaining 5, limit 6`, `grant\s+ops-ann\s+2\s+0`, `charge\s+` + analyst + `\s+\w+\s+1\s+0`, `limit\s+config\s+3\s+1e-06`, `limit\s+config\s+6\s+1e-06`,
		`their releases`, `\d+\s+(laplace|gaussian)\s+\d+\s+`} {
		if !matches(out, want) {
			t.Errorf("budget show lacks %q:\n%s", want, out)
		}
	}
	cmd := exec.Command(bin, "budget", "-config", p.conf, "grant", "nobody", "1", "0")
	cmd.Env = append(os.Environ(), "E2E_PROC_PW="+procPassword)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), `no privacy budget for analyst "nobody"`) {
		t.Errorf("grant to an unknown analyst: %v\n%s", err, out)
	}
	if _, err := direct(t).Exec(ctx, `DELETE FROM dpproxy.charges WHERE analyst = $1`, analyst); err == nil {
		t.Error("deleting from the audit log succeeded")
	}
}
