package e2e

// Tests of the analyst's and the operator's experience: EXPLAIN DP, the
// NOTICE after each answer, metrics, the per-query log, check-config and
// the demo binary.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dpproxy/dpproxy/internal/testconf"
	"github.com/dpproxy/dpproxy/proxy"
)

// operatorConfig (testconf.Operator) has analysts only these tests use
// (budgets live in the shared ledger) and the private table op_secrets,
// created by secretsTable.
var operatorConfig = testconf.YAML(testconf.Operator)

// opPassword is every operator-test analyst's password; it must never
// appear in a log.
const opPassword = "op-pw-Hx7Qz9"

// The private table's secret: neither may appear in a log.
const (
	secretText  = "zq-SECRET-8841"
	secretScore = "987654"
)

var secretsOnce sync.Once

// secretsTable creates public.op_secrets (once per test binary) with a
// row holding the secret text and score among ordinary rows.
func secretsTable(t *testing.T) {
	t.Helper()
	var err error
	secretsOnce.Do(func() {
		conn, e := pgx.Connect(ctx, env.upstream)
		if e != nil {
			err = e
			return
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, `
			DROP TABLE IF EXISTS public.op_secrets;
			CREATE TABLE public.op_secrets (person_id int NOT NULL, secret text NOT NULL, score int NOT NULL);
			INSERT INTO public.op_secrets SELECT i, 'ordinary-' || i, i FROM generate_series(1, 40) AS i;
			INSERT INTO public.op_secrets VALUES (41, '`+secretText+`', `+secretScore+`);`)
	})
	if err != nil {
		t.Fatalf("creating op_secrets: %v", err)
	}
}

func operatorProxy(t *testing.T, logw io.Writer) (*proxy.Server, string) {
	t.Helper()
	secretsTable(t)
	cfg := configFor(t, operatorConfig, map[string]string{"PW": opPassword})
	if logw == nil {
		_, addr, _ := startProxyWith(t, cfg)
		return nil, addr
	}
	srv, err := proxy.New(ctx, cfg, proxy.Options{Logger: slog.New(slog.NewJSONHandler(logw, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		srv.Close()
	})
	return srv, ln.Addr().String()
}

// noticeConn connects with the simple protocol and collects NOTICEs.
func noticeConn(t *testing.T, addr, user string) (*pgx.Conn, *[]string) {
	t.Helper()
	cc, err := pgx.ParseConfig(fmt.Sprintf("postgres://%s:%s@%s/shop?sslmode=disable", user, opPassword, addr))
	if err != nil {
		t.Fatal(err)
	}
	cc.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	var mu sync.Mutex
	notices := &[]string{}
	cc.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		*notices = append(*notices, n.Message)
		mu.Unlock()
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn, notices
}

func explainLines(t *testing.T, conn *pgx.Conn, sql string) []string {
	t.Helper()
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return lines
}

// laplaceBound is the 95% error bound of Laplace noise with scale
// l0·lInf/eps, rounded to three digits as the proxy prints it.
func laplaceBound(l0, lInf, eps float64) string {
	b := l0 * lInf / eps * math.Log(20)
	r, _ := strconv.ParseFloat(strconv.FormatFloat(b, 'g', 3, 64), 64)
	return strconv.FormatFloat(r, 'f', -1, 64)
}

func TestExplainDPShowsEveryColumnAndChargesNothing(t *testing.T) {
	_, addr := operatorProxy(t, nil)
	conn, _ := noticeConn(t, addr, "op_explain")
	before := showBudget(t, conn)

	// Three aggregates, public keys: no partition selection, δ 0; amount
	// is NOT NULL, so avg is sum/count (free) and count and sum get ε/2.
	lines := explainLines(t, conn, "EXPLAIN DP SELECT region, count(*), sum(amount), avg(amount) FROM orders GROUP BY region")
	text := strings.Join(lines, "\n")
	half := formatFloat(0.5)
	want := []string{
		"DP query over public.orders, privacy unit customer_id, mechanism laplace",
		"Contribution bounds: at most 8 rows per unit per group, at most 4 group(s) per unit",
		"Charge: ε=1 δ=0 (of the session's ε=1 δ=0.0000001; ε split in 2 equal share(s): 2 aggregate(s) (1 more derived from them, free))",
		"Column region: group key with public values: all 4 are released",
		fmt.Sprintf("Column count (count): laplace, sensitivity L0=4 L∞=8, ε=%s δ=0, noise scale b=%s", half, formatFloat(64)),
		"95% error ±" + laplaceBound(4, 8, 0.5),
		fmt.Sprintf("Column sum (sum): laplace, sensitivity L0=4 L∞=4000, ε=%s δ=0", half),
		"95% error ±" + laplaceBound(4, 4000, 0.5),
		"Column avg (avg): derived as sum(amount) / count(*) of the released values (post-processing, no budget of its own",
		"Budget left after this query: ε=9 δ=0.00001 (now ε=10 δ=0.00001)",
		"Rewritten SQL ($1 is a fresh secret seed per execution):",
		"dp_per_unit",
	}
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("EXPLAIN DP lacks %q; got:\n%s", w, text)
		}
	}
	if strings.Contains(text, "Partition selection:") {
		t.Errorf("EXPLAIN DP of a query on public keys mentions partition selection:\n%s", text)
	}

	// A private group key: partition selection takes a share and all of δ.
	lines = explainLines(t, conn, "EXPLAIN DP SELECT channel, count(*) FROM orders GROUP BY channel")
	text = strings.Join(lines, "\n")
	for _, w := range []string{
		"Charge: ε=1 δ=0.0000001 (of the session's ε=1 δ=0.0000001; ε split in 2 equal share(s): 1 aggregate(s) and partition selection)",
		"Column channel: group key read from the private table: a value is released only through partition selection",
		"Column count (count): laplace, sensitivity L0=4 L∞=8, ε=0.5 δ=0",
		"95% error ±" + laplaceBound(4, 8, 0.5),
		"Partition selection: a group is released when a random draw with a probability set by its count of distinct units succeeds (optimal pre-aggregated selection, L0=4, ε=0.5 δ=0.0000001)",
		"Budget left after this query: ε=9 δ=0.0000099",
	} {
		if !strings.Contains(text, w) {
			t.Errorf("EXPLAIN DP lacks %q; got:\n%s", w, text)
		}
	}

	// Gaussian noise is described by σ.
	if _, err := conn.Exec(ctx, "SET dp.mechanism = gaussian"); err != nil {
		t.Fatal(err)
	}
	text = strings.Join(explainLines(t, conn, "EXPLAIN DP SELECT count(*) FROM orders"), "\n")
	for _, w := range []string{"mechanism gaussian", "Column count (count): gaussian, sensitivity L0=1 L∞=8, ε=1 δ=0.0000001, noise σ"} {
		if !strings.Contains(text, w) {
			t.Errorf("EXPLAIN DP (gaussian) lacks %q; got:\n%s", w, text)
		}
	}

	if after := showBudget(t, conn); after != before {
		t.Errorf("EXPLAIN DP charged: budget %+v before, %+v after", before, after)
	}
}

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func TestNoticeGivesErrorBoundsAndCanBeSilenced(t *testing.T) {
	_, addr := operatorProxy(t, nil)
	conn, notices := noticeConn(t, addr, "op_notice")

	q := "SELECT count(*), sum(amount) FROM orders WHERE amount > 50"
	if _, err := conn.Exec(ctx, q); err != nil {
		t.Fatal(err)
	}
	// No GROUP BY: each person touches one group (L0 = 1); two aggregates.
	want := fmt.Sprintf("dp: count: ±%s (95%%), sum: ±%s (95%%); charged ε=1 δ=0, remaining ε=9 δ=0.00001",
		noticeBar(1, 8, 0.5, 0.5), noticeBar(1, 4000, 0.5, 0))
	if len(*notices) != 1 || (*notices)[0] != want {
		t.Fatalf("NOTICE = %q, want [%q]", *notices, want)
	}

	if _, err := conn.Exec(ctx, q); err != nil {
		t.Fatal(err)
	}
	wantRepeat := fmt.Sprintf("dp: count: ±%s (95%%), sum: ±%s (95%%); repeated query: the earlier noisy answer, nothing charged",
		noticeBar(1, 8, 0.5, 0.5), noticeBar(1, 4000, 0.5, 0))
	if len(*notices) != 2 || (*notices)[1] != wantRepeat {
		t.Fatalf("NOTICE of the repeat = %q, want %q", *notices, wantRepeat)
	}

	// AVG's bound depends on the group's size.
	if _, err := conn.Exec(ctx, "SELECT avg(amount) FROM orders"); err != nil {
		t.Fatal(err)
	}
	if got := (*notices)[2]; !regexp.MustCompile(`^dp: avg: ±[0-9.]+/\(n−[0-9.]+\) \(95%; n = rows in the group\); charged ε=1 δ=0, remaining ε=8 δ=0.00001$`).MatchString(got) {
		t.Errorf("NOTICE of avg = %q", got)
	}

	if _, err := conn.Exec(ctx, "SET dp.notices = off"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT count(*) FROM orders WHERE amount > 60"); err != nil {
		t.Fatal(err)
	}
	if len(*notices) != 3 {
		t.Errorf("with dp.notices = off a NOTICE came: %q", (*notices)[3:])
	}
	// Silencing the notice does not skip the charge.
	if b := showBudget(t, conn); b.epsSpent != 3 {
		t.Errorf("ε spent = %v after three charged queries, want 3", b.epsSpent)
	}
	if _, err := conn.Exec(ctx, "RESET dp.notices"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT count(*) FROM orders WHERE amount > 70"); err != nil {
		t.Fatal(err)
	}
	if len(*notices) != 4 {
		t.Errorf("after RESET dp.notices: %d notices, want 4", len(*notices))
	}
}

// metricSample is one line of the Prometheus text format.
type metricSample struct {
	name   string
	labels map[string]string
	value  float64
}

var labelRE = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)

func scrape(t *testing.T, u string) []metricSample {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	var out []metricSample
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad metric line %q", line)
		}
		s := metricSample{name: line[:i], labels: map[string]string{}, value: v}
		if j := strings.IndexByte(line[:i], '{'); j >= 0 {
			s.name = line[:j]
			for _, m := range labelRE.FindAllStringSubmatch(line[j:i], -1) {
				s.labels[m[1]] = m[2]
			}
		}
		out = append(out, s)
	}
	return out
}

// metricValue returns the value of the sample with that name and at least
// those labels, and whether there is one.
func metricValue(samples []metricSample, name string, labels ...string) (float64, bool) {
next:
	for _, s := range samples {
		if s.name != name {
			continue
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if s.labels[labels[i]] != labels[i+1] {
				continue next
			}
		}
		return s.value, true
	}
	return 0, false
}

func TestMetricsAreScrapedOverHTTP(t *testing.T) {
	srv, addr := operatorProxy(t, io.Discard)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.MetricsHandler()}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	metricsURL := "http://" + ln.Addr().String() + "/metrics"

	if _, err := dialAt(addr, "op_metrics", "wrong-password"); err == nil {
		t.Fatal("a wrong password was accepted")
	}
	conn, _ := noticeConn(t, addr, "op_metrics")
	mustExec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	wantCode := func(sql, code string) {
		t.Helper()
		_, err := conn.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != code {
			t.Fatalf("%s: error %v, want SQLSTATE %s", sql, err, code)
		}
	}
	mustExec("SELECT count(*) FROM orders WHERE amount > 10")            // answered, ε 1
	mustExec("SELECT count(*) FROM orders WHERE amount > 10")            // cache hit
	mustExec("SELECT count(*) FROM products")                            // pass-through
	mustExec("EXPLAIN DP SELECT count(*) FROM orders WHERE amount > 20") // explain, no charge
	wantCode("SELECT * FROM orders", "42501")                            // refused by the analyser
	wantCode("SELECT count(*) FROM orders WHERE amount > 30", "53400")   // refused: 1.5 - 1 < 1
	wantCode("SELECT count(*) FROM no_such_table_xyz", "42501")          // unlisted table

	samples := scrape(t, metricsURL)
	check := func(want float64, name string, labels ...string) {
		t.Helper()
		got, ok := metricValue(samples, name, labels...)
		if !ok || got != want {
			t.Errorf("%s%v = %v (present %v), want %v", name, labels, got, ok, want)
		}
	}
	check(1, "dpproxy_connections_active")
	check(1, "dpproxy_connections_total")
	check(1, "dpproxy_auth_failures_total")
	check(2, "dpproxy_queries_total", "kind", "private", "outcome", "answered", "code", "")
	check(1, "dpproxy_queries_total", "kind", "private", "outcome", "refused", "code", "53400")
	check(1, "dpproxy_queries_total", "kind", "passthrough", "outcome", "answered")
	check(1, "dpproxy_queries_total", "kind", "explain_dp", "outcome", "answered")
	check(2, "dpproxy_queries_total", "kind", "analysis", "outcome", "refused", "code", "42501")
	check(1, "dpproxy_answer_cache_hits_total")
	check(1, "dpproxy_epsilon_spent_total", "analyst", "op_metrics")
	check(0, "dpproxy_epsilon_spent_total", "analyst", "op_logs")
	check(0.5, "dpproxy_epsilon_remaining", "analyst", "op_metrics")
	// Two visits to the ledger (a charge, a refused charge) and two to the
	// database (describe and run, describe only); the cache hit visits none.
	check(2, "dpproxy_query_duration_seconds_count", "kind", "private", "part", "ledger")
	check(2, "dpproxy_query_duration_seconds_count", "kind", "private", "part", "upstream")
	check(3, "dpproxy_query_duration_seconds_count", "kind", "private", "part", "total")
	check(1, "dpproxy_query_duration_seconds_count", "kind", "passthrough", "part", "upstream")
	if v, ok := metricValue(samples, "dpproxy_query_duration_seconds_sum", "kind", "private", "part", "upstream"); !ok || !(v > 0) {
		t.Errorf("upstream time of private queries = %v, want > 0", v)
	}
	if _, ok := metricValue(samples, "go_goroutines"); !ok {
		t.Errorf("the Go runtime collector is missing")
	}

	conn.Close(ctx)
	eventually(t, 5*time.Second, "after the client left", func() error {
		if v, _ := metricValue(scrape(t, metricsURL), "dpproxy_connections_active"); v != 0 {
			return fmt.Errorf("dpproxy_connections_active = %v", v)
		}
		return nil
	})
}

// syncBuffer is a bytes.Buffer safe for the proxy's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

func TestLogsOneLinePerQueryWithoutSecrets(t *testing.T) {
	var logs syncBuffer
	_, addr := operatorProxy(t, &logs)
	if c, err := dialAt(addr, "op_logs", "not-"+opPassword); err == nil {
		c.Close(ctx)
		t.Fatal("a wrong password was accepted")
	}
	conn, _ := noticeConn(t, addr, "op_logs")
	queries := []struct {
		sql  string
		code string // "" when answered
	}{
		{"SELECT count(*), sum(score) FROM op_secrets WHERE secret = '" + secretText + "'", ""},
		{"SELECT count(*) FROM op_secrets WHERE score = " + secretScore, ""},
		{"SELECT secret FROM op_secrets WHERE secret = '" + secretText + "'", "42501"},
		{"SELECT sum(score) FROM op_secrets WHERE score / 0 = " + secretScore, "42501"},
		{"EXPLAIN DP SELECT sum(score) FROM op_secrets WHERE secret = '" + secretText + "'", ""},
		{"SELECT name FROM products WHERE name = '" + secretText + "'", ""},
		{"SELECT count(*) FROM products WHERE name::int = 1", "22P02"},
		{"SET dp.epsilon = '" + secretText + "'", "22023"},
	}
	for _, q := range queries {
		_, err := conn.Exec(ctx, q.sql)
		var pgErr *pgconn.PgError
		switch {
		case q.code == "" && err != nil:
			t.Fatalf("%s: %v", q.sql, err)
		case q.code != "" && (!errors.As(err, &pgErr) || pgErr.Code != q.code):
			t.Fatalf("%s: error %v, want SQLSTATE %s", q.sql, err, q.code)
		}
	}
	conn.Close(ctx)

	out := logs.String()
	for _, secret := range []string{secretText, secretScore, opPassword} {
		if strings.Contains(out, secret) {
			t.Errorf("the log holds %q:\n%s", secret, out)
		}
	}
	// One "query" line per statement, with analyst, fingerprint, outcome,
	// charge and durations.
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", l, err)
		}
		if m["msg"] == "query" {
			lines = append(lines, m)
		}
	}
	if len(lines) != len(queries) {
		t.Fatalf("%d query log lines for %d statements:\n%s", len(lines), len(queries), out)
	}
	for i, m := range lines {
		if m["analyst"] != "op_logs" {
			t.Errorf("line %d: analyst %v", i, m["analyst"])
		}
		for _, k := range []string{"fingerprint", "outcome", "kind", "duration", "upstream", "ledger", "proxy"} {
			if _, ok := m[k]; !ok {
				t.Errorf("line %d lacks %s: %v", i, k, m)
			}
		}
		wantOutcome := "answered"
		if queries[i].code != "" {
			wantOutcome = "refused"
			if queries[i].code == "22P02" {
				wantOutcome = "failed"
			}
			if m["code"] != queries[i].code {
				t.Errorf("line %d: code %v, want %s", i, m["code"], queries[i].code)
			}
		}
		if m["outcome"] != wantOutcome {
			t.Errorf("line %d (%s): outcome %v, want %s", i, queries[i].sql, m["outcome"], wantOutcome)
		}
		// Answered pass-through statements log at debug (like
		// PostgreSQL's log_statement = none, they would otherwise cost a
		// write per query); private answers at info, refusals and
		// failures at warn.
		wantLevel := "INFO"
		switch {
		case wantOutcome != "answered":
			wantLevel = "WARN"
		case m["kind"] == "passthrough":
			wantLevel = "DEBUG"
		}
		if m["level"] != wantLevel {
			t.Errorf("line %d (%s): level %v, want %s", i, queries[i].sql, m["level"], wantLevel)
		}
	}
	if lines[0]["epsilon"] != 1.0 || lines[0]["fingerprint"] == "" {
		t.Errorf("the first query's line lacks its charge or fingerprint: %v", lines[0])
	}
	if _, ok := lines[4]["epsilon"]; ok {
		t.Errorf("EXPLAIN DP logged a charge: %v", lines[4])
	}
}

// buildBinary builds cmd/dpproxy into dir.
func buildBinary(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "dpproxy")
	cmd := exec.Command("go", "build", "-o", path, "./cmd/dpproxy")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return path
}

// TestBinary runs the built command: check-config's failure modes and the
// demo's tour and clean shutdown.
func TestBinary(t *testing.T) {
	bin := buildBinary(t, t.TempDir())
	t.Run("check-config", func(t *testing.T) { testCheckConfig(t, bin) })
	t.Run("demo", func(t *testing.T) { testDemo(t, bin) })
	t.Run("serve", func(t *testing.T) { testServe(t, bin) })
}

// testServe runs "dpproxy serve" with metrics and JSON logs from the
// configuration file, scrapes /metrics, and stops it with SIGTERM.
func testServe(t *testing.T, bin string) {
	yaml := upstreams(`
listen: 127.0.0.1:0
upstream: UPSTREAM
auth:
  method: trust
  users:
    - {name: op_serve, budget: {epsilon: 5, delta: 1.0e-6}}
tables:
` + goodTables + `
metrics: {listen: 127.0.0.1:0}
log: {format: json, level: info}
`)
	path := filepath.Join(t.TempDir(), "dpproxy.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	profile := filepath.Join(t.TempDir(), "cpu.prof")
	cmd := exec.Command(bin, "serve", "-config", path, "-cpuprofile", profile)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	type logLine map[string]any
	lines := make(chan logLine, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var m logLine
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = logLine{"msg": "NOT JSON: " + sc.Text()}
			}
			lines <- m
		}
	}()
	waitFor := func(msg string) logLine {
		t.Helper()
		timeout := time.After(time.Minute)
		for {
			select {
			case m, ok := <-lines:
				if !ok {
					t.Fatalf("serve exited before logging %q", msg)
				}
				if s, _ := m["msg"].(string); strings.HasPrefix(s, "NOT JSON") {
					t.Errorf("log line is not JSON: %s", s)
				}
				if m["msg"] == msg {
					return m
				}
			case <-timeout:
				t.Fatalf("no %q log line", msg)
			}
		}
	}
	proxyAddr, _ := waitFor("dpproxy listening")["addr"].(string)
	metricsAddr, _ := waitFor("metrics listening")["addr"].(string)

	cc, err := pgx.ParseConfig(fmt.Sprintf("postgres://op_serve@%s/shop?sslmode=disable", proxyAddr))
	if err != nil {
		t.Fatal(err)
	}
	cc.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT count(*) FROM orders WHERE amount > 5"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	q := waitFor("query")
	if q["analyst"] != "op_serve" || q["outcome"] != "answered" || q["epsilon"] != 1.0 {
		t.Errorf("query log line = %v", q)
	}
	samples := scrape(t, "http://"+metricsAddr+"/metrics")
	if v, _ := metricValue(samples, "dpproxy_epsilon_spent_total", "analyst", "op_serve"); v != 1 {
		t.Errorf("dpproxy_epsilon_spent_total{analyst=op_serve} = %v, want 1", v)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for range lines { // drain until serve closes standard error
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("serve exited with %v after SIGTERM", err)
	}
	// -cpuprofile: written when serve stops, as a gzipped pprof profile.
	if b, err := os.ReadFile(profile); err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("-cpuprofile wrote %d bytes (%v), want a gzipped profile", len(b), err)
	}
}

// checkRoles creates the two roles check-config expects: a query role
// that can read the demo tables and nothing else, and a ledger role that
// can charge the ledger (by grants, as operators may set it up, so that
// tests can take them away); both are dropped when the test ends.
func checkRoles(t *testing.T) (query, queryURL, ledger, ledgerURL string) {
	t.Helper()
	var b [4]byte
	rand.Read(b[:])
	query, ledger = "dpck_"+hex.EncodeToString(b[:]), "dpck_"+hex.EncodeToString(b[:])+"_ledger"
	admin := direct(t)
	stmts := []string{
		"CREATE ROLE " + query + " LOGIN PASSWORD 'ck-pw'",
		"GRANT SELECT ON public.orders, public.customers, public.products TO " + query,
		"CREATE ROLE " + ledger + " LOGIN PASSWORD 'ck-pw'",
		"GRANT USAGE ON SCHEMA dpproxy TO " + ledger,
		"GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA dpproxy TO " + ledger,
		"GRANT USAGE ON ALL SEQUENCES IN SCHEMA dpproxy TO " + ledger,
	}
	for _, s := range stmts {
		if _, err := admin.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), env.upstream)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		c.Exec(context.Background(), "DROP OWNED BY "+query+", "+ledger)
		c.Exec(context.Background(), "DROP ROLE "+query+", "+ledger)
	})
	u, err := url.Parse(env.upstream)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(query, "ck-pw")
	queryURL = u.String()
	u.User = url.UserPassword(ledger, "ck-pw")
	return query, queryURL, ledger, u.String()
}

// checkConfigTemplate is the file check-config reads, as text: a test puts
// in the upstream, a ledger_upstream line or none, and tables' lines
// (goodTables, or a broken file's).
const checkConfigTemplate = `
upstream: UPSTREAM
LEDGER
auth:
  method: trust
  users:
    - {name: someone, budget: {epsilon: 1, delta: 1.0e-6}}
tables:
TABLES
`

// goodTables is the tables section of a valid configuration file: the
// demo dataset's tables (testconf.Shop), indented under "tables:", its
// last line public.products' (the invalid file below adds to it).
var goodTables = strings.TrimSuffix(strings.TrimPrefix(testconf.YAML(testconf.Shop), "tables:\n"), "\n")

// runCheckConfig runs the binary's check-config on a configuration with
// upstream and, unless "", ledger_upstream, and returns its exit code and
// output.
func runCheckConfig(t *testing.T, bin, upstream, ledger, tables string) (int, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dpproxy.yaml")
	if ledger != "" {
		ledger = "ledger_upstream: " + ledger
	}
	yaml := strings.NewReplacer("UPSTREAM", upstream, "LEDGER", ledger, "TABLES", tables).Replace(checkConfigTemplate)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(cctx, bin, "check-config", "-config", path).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("check-config: %v\n%s", err, out)
	return -1, ""
}

func testCheckConfig(t *testing.T, bin string) {
	role, upstream, ledgerRole, ledger := checkRoles(t)
	// grant runs stmt as the superuser and undoes it with undo when the
	// subtest ends.
	grant := func(t *testing.T, stmt, undo string) {
		t.Helper()
		admin := direct(t)
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
		t.Cleanup(func() {
			if _, err := admin.Exec(context.Background(), undo); err != nil {
				t.Errorf("%s: %v", undo, err)
			}
		})
	}
	wantAll := func(t *testing.T, out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("output lacks %q:\n%s", w, out)
			}
		}
	}

	t.Run("ok", func(t *testing.T) {
		code, out := runCheckConfig(t, bin, upstream, ledger, goodTables)
		if code != 0 {
			t.Fatalf("exit %d, want 0:\n%s", code, out)
		}
		wantAll(t, out,
			"the file is valid",
			"role "+role,
			"ledger_upstream: database ",
			"role "+ledgerRole,
			"public.orders: private, unit customer_id, at most 4 groups per unit and 8 rows per unit per group; amount in [0, 500]; region public values north, south, east, west",
			"public.products: public",
			"privileges: "+role+" reads all 2 configured tables, can write none of them and cannot reach the ledger",
			"ledger: schema dpproxy",
			"role "+ledgerRole+" can charge it",
			"OK: the upstream matches the configuration",
		)
	})

	// public_values naming a public table's column: read as serve would.
	t.Run("public values from a table", func(t *testing.T) {
		tables := strings.Replace(goodTables, "region: {public_values: [north, south, east, west]}", "region: {public_values: {table: products, column: category}}", 1)
		code, out := runCheckConfig(t, bin, upstream, ledger, tables)
		if code != 0 {
			t.Fatalf("exit %d, want 0:\n%s", code, out)
		}
		wantAll(t, out, "region public values the 5 of public.products.category (read when dpproxy starts)")
		code, out = runCheckConfig(t, bin, upstream, ledger, strings.Replace(tables, "column: category", "column: nope", 1))
		if code != 1 {
			t.Fatalf("exit %d, want 1:\n%s", code, out)
		}
		wantAll(t, out, "tables.public.orders.columns.region.public_values: reading public.products.nope")
	})

	t.Run("the test harness's roles pass", func(t *testing.T) {
		code, out := runCheckConfig(t, bin, env.roles.QueryURL, env.roles.LedgerURL, goodTables)
		if code != 0 {
			t.Fatalf("exit %d, want 0:\n%s", code, out)
		}
	})

	// One DSN for queries and the ledger is the demo's set-up: refused,
	// whether ledger_upstream is absent or repeats upstream.
	for _, tc := range []struct{ name, ledger string }{{"one DSN", ""}, {"ledger_upstream equal to upstream", ledger}} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := runCheckConfig(t, bin, ledger, tc.ledger, goodTables)
			if code != 1 {
				t.Fatalf("exit %d, want 1:\n%s", code, out)
			}
			wantAll(t, out, "ledger_upstream: absent or the same as upstream: role "+ledgerRole+" both runs analysts' statements and may change budgets", "that is for a demo only")
		})
	}

	t.Run("query role reaches the ledger", func(t *testing.T) {
		grant(t, "GRANT USAGE ON SCHEMA dpproxy TO "+role+"; GRANT SELECT, UPDATE ON dpproxy.budgets TO "+role,
			"REVOKE USAGE ON SCHEMA dpproxy FROM "+role+"; REVOKE SELECT, UPDATE ON dpproxy.budgets FROM "+role)
		code, out := runCheckConfig(t, bin, upstream, ledger, goodTables)
		if code != 1 {
			t.Fatalf("exit %d, want 1:\n%s", code, out)
		}
		wantAll(t, out, "found 1 problem(s)",
			"upstream: role "+role+" can reach the ledger (SELECT ON dpproxy.budgets, UPDATE ON dpproxy.budgets), so a statement on a query connection could change budgets",
			"(REVOKE ALL ON SCHEMA dpproxy FROM "+role+")")
	})

	t.Run("query role can create in schema dpproxy", func(t *testing.T) {
		grant(t, "GRANT CREATE ON SCHEMA dpproxy TO "+role, "REVOKE CREATE ON SCHEMA dpproxy FROM "+role)
		code, out := runCheckConfig(t, bin, upstream, ledger, goodTables)
		if code != 1 {
			t.Fatalf("exit %d, want 1:\n%s", code, out)
		}
		wantAll(t, out, "upstream: role "+role+" can reach the ledger (CREATE ON SCHEMA dpproxy)", "REVOKE ALL ON SCHEMA dpproxy FROM "+role)
	})

	t.Run("PUBLIC reaches the ledger", func(t *testing.T) {
		grant(t, "GRANT USAGE ON SCHEMA dpproxy TO PUBLIC; GRANT TRIGGER ON dpproxy.budgets TO PUBLIC",
			"REVOKE USAGE ON SCHEMA dpproxy FROM PUBLIC; REVOKE TRIGGER ON dpproxy.budgets FROM PUBLIC")
		code, out := runCheckConfig(t, bin, upstream, ledger, goodTables)
		if code != 1 {
			t.Fatalf("exit %d, want 1:\n%s", code, out)
		}
		wantAll(t, out, "role "+role+" can reach the ledger (TRIGGER ON dpproxy.budgets)", "(REVOKE ALL ON SCHEMA dpproxy FROM PUBLIC)")
	})

	t.Run("query role is a member of the ledger role", func(t *testing.T) {
		grant(t, "GRANT "+ledgerRole+" TO "+role, "REVOKE "+ledgerRole+" FROM "+role)
		code, out := runCheckConfig(t, bin, upstream, ledger, goodTables)
		if code != 1 {
			t.Fatalf("exit %d, want 1:\n%s", code, out)
		}
		wantAll(t, out, "upstream: role "+role+" can reach the ledger (",
			"UPDATE ON dpproxy.budgets", "; through role "+ledgerRole+")",
			"(REVOKE "+ledgerRole+" FROM "+role+")")
	})

	t.Run("query role may create schemas", func(t *testing.T) {
		db := strings.TrimPrefix(mustURL(t, env.upstream).Path, "/")
		grant(t, "GRANT CREATE ON DATABASE "+db+" TO "+role, "REVOKE CREATE ON DATABASE "+db+" FROM "+role)
		code, out := runCheckConfig(t, bin, upstream, ledger, goodTables)
		if code != 1 {
			t.Fatalf("exit %d, want 1:\n%s", code, out)
		}
		wantAll(t, out, "upstream: role "+role+" can CREATE schemas in database "+db+": the query role should create nothing",
			"REVOKE CREATE ON DATABASE "+db+" FROM PUBLIC, "+role)
	})

	t.Run("ledger role may still create schemas", func(t *testing.T) {
		db := strings.TrimPrefix(mustURL(t, env.upstream).Path, "/")
		code, out := runCheckConfig(t, bin, upstream, ledger, goodTables)
		if code != 0 || strings.Contains(out, "can still CREATE") {
			t.Fatalf("exit %d and a CREATE warning without the grant:\n%s", code, out)
		}
		grant(t, "GRANT CREATE ON DATABASE "+db+" TO "+ledgerRole, "REVOKE CREATE ON DATABASE "+db+" FROM "+ledgerRole)
		code, out = runCheckConfig(t, bin, upstream, ledger, goodTables)
		if code != 0 {
			t.Fatalf("exit %d, want 0 (a warning):\n%s", code, out)
		}
		wantAll(t, out, "warning: ledger_upstream: role "+ledgerRole+" can still CREATE schemas in the database: the ledger exists",
			"REVOKE CREATE ON DATABASE "+db+" FROM "+ledgerRole)
	})

	t.Run("schema problems are all listed", func(t *testing.T) {
		// Literal, not from testconf: this broken file is what check-config is tested on.
		tables := `  public.orders:
    privacy_unit: buyer_id
    columns:
      amount: {lower: 0, upper: 500}
      channel: {lower: 0, upper: 1}
      discount: {lower: 0, upper: 1}
  public.no_such_table: {public: true}`
		code, out := runCheckConfig(t, bin, upstream, ledger, tables)
		if code != 1 {
			t.Fatalf("exit %d, want 1:\n%s", code, out)
		}
		wantAll(t, out,
			"found 4 problem(s)",
			`tables.public.orders.privacy_unit: column "buyer_id" does not exist in public.orders`,
			"tables.public.orders.columns.channel: lower/upper bounds need a numeric column, but public.orders.channel is text",
			"tables.public.orders.columns.discount: column does not exist in public.orders",
			"tables.public.no_such_table: no such table or view public.no_such_table",
		)
	})

	// A mistyped key and problems upstream come back in one run, each
	// with its line and key path (issue 17).
	t.Run("file and schema problems in one run", func(t *testing.T) {
		tables := `  public.orders:
    privacy_unit: buyer_id
    max_rows_per_unt: 3
    columns:
      amount: {lower: 0, upper: 500}
  public.no_such_table: {public: true}`
		code, out := runCheckConfig(t, bin, upstream, ledger, tables)
		if code != 1 {
			t.Fatalf("exit %d, want 1:\n%s", code, out)
		}
		wantAll(t, out,
			"configuration is invalid",
			"dpproxy.yaml:11: tables.public.orders.max_rows_per_unt: unknown key (did you mean tables.public.orders.max_rows_per_unit?)",
			"found 2 problem(s) with the upstream",
			`dpproxy.yaml:10: tables.public.orders.privacy_unit: column "buyer_id" does not exist in public.orders`,
			"dpproxy.yaml:14: tables.public.no_such_table: no such table or view public.no_such_table",
		)
	})

	t.Run("writable role", func(t *testing.T) {
		grant(t, "GRANT INSERT, DELETE ON public.orders TO "+role, "REVOKE INSERT, DELETE ON public.orders FROM "+role)
		grant(t, "GRANT UPDATE ON public.customers TO "+role, "REVOKE UPDATE ON public.customers FROM "+role)
		code, out := runCheckConfig(t, bin, upstream, ledger, goodTables)
		if code != 1 {
			t.Fatalf("exit %d, want 1:\n%s", code, out)
		}
		wantAll(t, out,
			"found 2 problem(s)",
			"tables.public.orders: role "+role+" can INSERT, DELETE public.orders: the proxy must only read",
			"role "+role+" can write public.customers: the query role should write nothing",
		)
	})

	t.Run("ledger not chargeable", func(t *testing.T) {
		grant(t, "REVOKE UPDATE ON dpproxy.budgets FROM "+ledgerRole, "GRANT UPDATE ON dpproxy.budgets TO "+ledgerRole)
		code, out := runCheckConfig(t, bin, upstream, ledger, goodTables)
		if code != 1 || !strings.Contains(out, "ledger_upstream: role "+ledgerRole+" cannot charge the ledger: it lacks UPDATE ON dpproxy.budgets") {
			t.Errorf("exit %d, want 1 and a ledger problem:\n%s", code, out)
		}
	})

	t.Run("superuser", func(t *testing.T) {
		code, out := runCheckConfig(t, bin, env.upstream, ledger, goodTables)
		if code != 1 || !strings.Contains(out, "is a superuser: it can write every table, the ledger's too") {
			t.Errorf("exit %d, want 1 and a superuser problem:\n%s", code, out)
		}
	})

	t.Run("unreachable upstream", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close() // nothing listens there now
		code, out := runCheckConfig(t, bin, "postgres://nobody:hunter2-pw@"+addr+"/x?sslmode=disable&connect_timeout=5", ledger, goodTables)
		if code != 1 || !strings.Contains(out, "upstream: cannot connect to "+addr+" (database x, user nobody): connection refused") {
			t.Errorf("exit %d, want 1 and a connection problem:\n%s", code, out)
		}
		if strings.Contains(out, "hunter2-pw") {
			t.Errorf("check-config printed the upstream password:\n%s", out)
		}
	})

	t.Run("unreachable ledger", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		code, out := runCheckConfig(t, bin, upstream, "postgres://nobody:hunter3-pw@"+addr+"/x?sslmode=disable&connect_timeout=5", goodTables)
		if code != 1 || !strings.Contains(out, "ledger_upstream: cannot connect to "+addr+" (database x, user nobody): connection refused") {
			t.Errorf("exit %d, want 1 and a connection problem:\n%s", code, out)
		}
		if !strings.Contains(out, "public.orders: private") {
			t.Errorf("the query role's checks did not run without the ledger:\n%s", out)
		}
		if strings.Contains(out, "hunter3-pw") {
			t.Errorf("check-config printed the ledger password:\n%s", out)
		}
	})

	t.Run("invalid file", func(t *testing.T) {
		code, out := runCheckConfig(t, bin, upstream, ledger, goodTables+"\n    max_rows: 3")
		if code != 1 || !strings.Contains(out, "configuration is invalid") {
			t.Errorf("exit %d, want 1 and an invalid configuration:\n%s", code, out)
		}
	})
}

func testDemo(t *testing.T, bin string) {
	db, err := freshDatabase(ctx, env.upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), env.upstream)
		if err == nil {
			c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+strings.TrimPrefix(mustURL(t, db).Path, "/")+" WITH (FORCE)")
			c.Close(context.Background())
		}
	})
	cmd := exec.Command(bin, "demo", "-listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "DPPROXY_UPSTREAM="+db)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })

	var out syncBuffer
	psql := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		found := false
		for sc.Scan() {
			out.Write([]byte(sc.Text() + "\n"))
			if !found && strings.Contains(sc.Text(), `psql "host=`) {
				found = true
				psql <- sc.Text()
			}
		}
	}()
	var line string
	select {
	case line = <-psql:
	case <-time.After(2 * time.Minute):
		t.Fatalf("no psql line from the demo; stdout:\n%s\nstderr:\n%s", out.String(), stderr.String())
	}
	m := regexp.MustCompile(`host=(\S+) port=(\d+) user=(\w+) dbname=(\w+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("cannot read the psql line %q", line)
	}
	cc, err := pgx.ParseConfig(fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", m[3], net.JoinHostPort(m[1], m[2]), m[4]))
	if err != nil {
		t.Fatal(err)
	}
	cc.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		t.Fatalf("connect to the demo: %v", err)
	}
	var n int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM orders").Scan(&n); err != nil || n < 10000 {
		t.Errorf("count(*) through the demo = %d, %v", n, err)
	}
	conn.Close(ctx)

	// The tour is printed before the demo waits for Ctrl-C.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "Press Ctrl-C") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	tour := out.String()
	for _, w := range []string{
		"A short tour", " 1. SELECT region, count(*)", " 2. SELECT channel", " 3. SELECT count(DISTINCT customer_id)", "Look for:",
		"How query 1 is answered (EXPLAIN DP SELECT region", "    DP query over public.orders", "    Rewritten SQL",
		"SHOW dp.budget;",
	} {
		if !strings.Contains(tour, w) {
			t.Errorf("the demo's tour lacks %q:\n%s", w, tour)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("demo exited with %v after SIGINT; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("the demo did not exit within a minute of SIGINT")
	}
	// Nothing is left behind in the database.
	c, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var left []string
	rows, err := c.Query(ctx, `SELECT n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	if left, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("the demo left relations behind: %v", left)
	}
	var schema bool
	if err := c.QueryRow(ctx, "SELECT to_regnamespace('dpproxy') IS NOT NULL").Scan(&schema); err != nil || schema {
		t.Errorf("schema dpproxy left behind (%v)", err)
	}
	// The demo ran with two roles, and dropped them.
	if !strings.Contains(out.String(), "(SELECT on the three tables only) and ledger role dpproxy_demo_") {
		t.Errorf("the demo did not say it created a query role and a ledger role:\n%s", out.String())
	}
	var roles int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_roles WHERE rolname LIKE 'dpproxy\\_demo\\_%'").Scan(&roles); err != nil || roles != 0 {
		t.Errorf("the demo left %d roles behind (%v)", roles, err)
	}
	if !strings.Contains(out.String(), "The demo tables and roles (and the ledger, if the demo created it) are dropped.") {
		t.Errorf("the demo did not say it cleaned up:\n%s", out.String())
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
